/*
 * glibc's malloc_trim(0) for Node (packages/proxy/src/malloc-trim.ts says why): a Node-API
 * module, so one build serves every Node version and every thread (NAPI_MODULE_INIT makes it
 * context-aware: data-plane worker threads load it too). Built by scripts/build-native.ts
 * against the headers of the Node that runs it; never committed.
 *
 * trim() returns true when memory was given back to the kernel, false when there was none
 * to give, and is not defined on a C library without malloc_trim (the build then fails and
 * the proxy runs without it).
 */
#include <malloc.h>
#include <node_api.h>

static napi_value trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value released;
  if (napi_get_boolean(env, malloc_trim(0) != 0, &released) != napi_ok) return NULL;
  return released;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "trim", NAPI_AUTO_LENGTH, trim, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "trim", fn) != napi_ok) return NULL;
  return exports;
}
