# syntax=docker/dockerfile:1
# The `portico` image: the gateway (packages/proxy), standalone (`-f FILE`) or, with
# XDS_ADDRESS set and no arguments, the data plane the controller deploys for each Gateway.
#
#   docker build -f deploy/portico.Dockerfile -t ghcr.io/portico-dev/portico:0.1.0 .
#   docker run --rm -p 3000:3000 -v "$PWD/examples:/config:ro" \
#     ghcr.io/portico-dev/portico:0.1.0 -f /config/quickstart.yaml
#
# Built from the repository root. Node runs the TypeScript sources directly (type stripping),
# which it refuses to do under node_modules/, so the image keeps the workspace's layout:
# packages/<name>/ next to their node_modules links, as in a clone, holding only what the
# proxy's module graph reaches (scripts/runtime-tree.ts), its production dependencies, the
# built admin UI and protos/.

ARG NODE_IMAGE=node:24.21.0-bookworm-slim
# The build stage's: the same Node on the same Debian release, with its C compiler (the
# malloc_trim module below); the runtime stage gets the module, not the compiler.
ARG NODE_BUILD_IMAGE=node:24.21.0-bookworm

FROM ${NODE_BUILD_IMAGE} AS build
WORKDIR /app
ENV CI=true
# pnpm at the version package.json pins (packageManager), installed with npm as scripts/setup does.
COPY package.json ./
RUN npm install --global --no-audit --no-fund --loglevel=error \
      "pnpm@$(node -p 'require("./package.json").packageManager.split("@")[1]')"
# Every package of the lockfile into pnpm's store (dev ones too: the UI build needs them):
# this layer changes only with the lockfile.
COPY pnpm-lock.yaml pnpm-workspace.yaml .npmrc ./
RUN --mount=type=cache,id=portico-pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm fetch
COPY . .
# The admin web UI (packages/ui, served at /ui): built with its dev dependencies.
RUN --mount=type=cache,id=portico-pnpm-store,target=/root/.local/share/pnpm/store \
    if node -e 'process.exit(require("./packages/ui/package.json").scripts?.build ? 0 : 1)' 2>/dev/null; then \
      pnpm install --offline --frozen-lockfile --filter "@portico/ui..." \
      && pnpm --filter @portico/ui run build; \
    fi
# Production dependencies of the proxy and of the workspace packages it imports (dev ones
# are removed again), then the runtime tree in /out.
RUN --mount=type=cache,id=portico-pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm install --offline --frozen-lockfile --prod --filter "@portico/proxy..." \
    && node scripts/runtime-tree.ts @portico/proxy /out
# The config schema's validator precompiled into the tree, as scripts/setup does in a clone
# (packages/engine/src/config/validate.ts): without it the proxy compiles the schema with Ajv
# at start, about 300 ms and much of its start-up garbage. Its validate function is compiled
# with the module, so the compile cache filled below holds its bytecode and a pod does not
# parse it again (docs/multicore.md, Memory). Then fail the build, not the pod, if a module
# does not resolve (no compile cache: the runtime stage fills its own, as the pods' user).
# glibc's malloc_trim as a Node-API module (packages/proxy/src/malloc-trim.ts: what start-up
# freed in each thread's malloc arena goes back to the kernel), built with this stage's gcc
# against this Node's headers, as scripts/setup does in a clone.
RUN node scripts/gen-validator.ts /out/packages/engine/node_modules/.cache/portico/config-validator.cjs \
    && node scripts/build-native.ts /out/packages/proxy/node_modules/.cache/portico/malloc-trim.node \
    && test -f /out/packages/proxy/node_modules/.cache/portico/malloc-trim.node \
    && NODE_DISABLE_COMPILE_CACHE=1 node /out/packages/proxy/bin/portico.ts --version

FROM ${NODE_IMAGE} AS runtime
# Minimal runtime: Node alone (no npm, npx, corepack or yarn) and an unprivileged user whose
# numeric id (10101, as the controller runs proxy pods) lets Kubernetes verify runAsNonRoot.
# The application files stay owned by root, so the process cannot modify them. MCP stdio
# targets launched with npx need a derived image that adds npm.
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx \
      /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* \
    && groupadd --gid 10101 portico \
    && useradd --uid 10101 --gid 10101 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin portico
WORKDIR /app
COPY --from=build /out/ /app/
# Node's compile cache, filled here by a gateway run for a moment (`portico --warm-cache`) as
# the pods' user and with their command line — Node keys the cache by both — then made
# root's and read-only like the rest of /app. A pod's proxy (and each data-plane worker) then
# takes its modules stripped and compiled from it, and Node's TypeScript compiler never loads:
# ~13 MB of RSS a thread, and a faster start (docs/multicore.md).
ENV NODE_ENV=production \
    NODE_COMPILE_CACHE=/app/packages/proxy/node_modules/.cache/node-compile-cache
RUN install -d -o 10101 -g 10101 "$NODE_COMPILE_CACHE"
USER 10101:10101
RUN node --max-semi-space-size=4 /app/packages/proxy/bin/portico.ts --warm-cache
USER 0:0
RUN chown -R root:root "$NODE_COMPILE_CACHE" && chmod -R a+rX,a-w "$NODE_COMPILE_CACHE"
USER 10101:10101
# Admin (15000) binds to loopback; metrics (15020) and readiness (15021) to every interface;
# listener ports come from the config.
EXPOSE 15020 15021
# glibc's malloc without its dynamic mmap threshold, which kept start-up's freed memory in the
# process (packages/proxy/src/malloc-tunables.ts; read by glibc as a process starts).
ENV GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072
# The young generation the data plane runs with (packages/proxy/src/v8-flags.ts); given here, bin/portico.ts need not start Node again.
ENTRYPOINT ["node", "--max-semi-space-size=4", "/app/packages/proxy/bin/portico.ts"]
