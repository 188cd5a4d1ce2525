/**
 * Fields of the config schema that hold secrets, marked with a `$comment` (a JSON Schema
 * annotation every validator ignores) so one schema serves both front ends: a standalone file
 * writes a path or the value; a cluster resource (PorticoPolicy, PorticoBackend) writes a
 * `secretRef` instead -- its CRD schema and its translation read these marks
 * (packages/controller/src/crds). Credentials therefore never sit in a resource's spec.
 */

/** A path to a file holding a secret or a certificate (a JWKS, a PEM key): from a Secret's key in cluster mode. */
export const SECRET_FILE = 'portico:secret-file'
/** A value that is itself a secret (an API key, a client secret, htpasswd lines): a Secret's key in cluster mode. */
export const SECRET_VALUE = 'portico:secret-value'
