/**
 * The one reader of files a config names (src/config/referenced-file.ts, issue 49): a regular
 * file within the limit is read; a directory, a FIFO or a device is refused without a byte
 * read; a file over the limit is refused by its size, and the loader reports each at the
 * field that names it. Only /dev/null stands for a device here, and no FIFO is used: were the
 * reader to regress, reading /dev/zero would fill this process's memory and a FIFO would block
 * it for good. /dev/zero, /dev/urandom and a FIFO are tried by e2e/test/security-config.test.ts
 * in a memory-capped child with a deadline.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readReferencedFile } from '../src/config/referenced-file.ts'
import { loadConfigText } from '../src/config/load.ts'
import { isPorticoError } from '../src/util/errors.ts'

function refusal (path: string, maxBytes = 1024): string {
  try {
    readReferencedFile(path, maxBytes)
  } catch (err) {
    return isPorticoError(err, 'PORTICO_REFERENCED_FILE') ? err.message : `errno ${(err as NodeJS.ErrnoException).code}`
  }
  return 'read'
}

test('a regular file within the limit is read; what is not a regular file is refused unread; an over-limit file by its size', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-ref-'))
  try {
    writeFileSync(join(dir, 'ok.pem'), 'x'.repeat(1024))
    assert.equal(readReferencedFile(join(dir, 'ok.pem'), 1024).length, 1024)
    writeFileSync(join(dir, 'big.pem'), 'x'.repeat(1025))
    assert.equal(refusal(join(dir, 'big.pem')), 'file is 1025 bytes, limit 1024 (--max-config-size)')
    truncateSync(join(dir, 'big.pem'), 300 * 1024 * 1024)
    assert.equal(refusal(join(dir, 'big.pem'), 8 * 1024 * 1024), 'file is 314572800 bytes, limit 8388608 (--max-config-size)')
    mkdirSync(join(dir, 'd'))
    assert.equal(refusal(join(dir, 'd')), 'a directory, not a regular file (not read)')
    assert.equal(refusal('/dev/null'), 'a character device, not a regular file (not read)')
    assert.equal(refusal(join(dir, 'missing')), 'errno ENOENT')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('the loader reads every file field through it, with the config size limit, and says why at the field', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-ref-'))
  try {
    writeFileSync(join(dir, 'jwks.json'), JSON.stringify({ keys: [] }) + ' '.repeat(2048))
    const text = `gateways:
  default:
    port: 3000
    protocol: HTTPS
    tls: { cert: /dev/null, key: ${dir}, root: jwks.json }
routes:
  - policies:
      jwtAuth: { issuer: i, audiences: [a], jwks: { file: jwks.json } }
      basicAuth: { htpasswd: { file: /dev/null } }
    backends: [{ host: "127.0.0.1:1", policies: { backendTLS: { root: /dev/null } } }]
`
    const result = loadConfigText(text, { baseDir: dir, maxBytes: 2048 })
    assert.equal(result.ok, false)
    const got = !result.ok ? result.diagnostics.map(d => `${d.path.join('.')}: ${d.message}`) : []
    assert.deepEqual(got, [
      'gateways.default.tls.cert: cannot read /dev/null: a character device, not a regular file (not read)',
      `gateways.default.tls.key: cannot read ${dir}: a directory, not a regular file (not read)`,
      `gateways.default.tls.root: cannot read ${join(dir, 'jwks.json')}: file is 2059 bytes, limit 2048 (--max-config-size)`,
      `routes.0.policies.jwtAuth.jwks.file: cannot read ${join(dir, 'jwks.json')}: file is 2059 bytes, limit 2048 (--max-config-size)`,
      'routes.0.policies.basicAuth.htpasswd.file: cannot read /dev/null: a character device, not a regular file (not read)',
      'routes.0.backends.0.policies.backendTLS.root: cannot read /dev/null: a character device, not a regular file (not read)'
    ])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('htpasswd: a file that is not htpasswd is one error by line numbers; inline lines never echo their text', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-ref-'))
  try {
    const shadow = Array.from({ length: 30 }, (_, i) => `user${i}:$6$salt$SecretHash${i}:19000:0:99999:7:::`).join('\n')
    writeFileSync(join(dir, 'shadow'), shadow)
    const file = loadConfigText('gateways: {default: {port: 3000}}\nroutes:\n  - policies: { basicAuth: { htpasswd: { file: shadow } } }\n    backends: [{ host: "127.0.0.1:1" }]\n', { baseDir: dir })
    const fileErrors = !file.ok ? file.diagnostics.map(d => d.message) : []
    assert.deepEqual(fileErrors, [`${join(dir, 'shadow')} is not an htpasswd file: lines 1, 2, 3, 4, 5 and 25 more are not user:hash with a bcrypt, apr1 or SHA hash (0 valid entries; the lines are not shown)`])
    const inline = loadConfigText('gateways: {default: {port: 3000}}\nroutes:\n  - policies: { basicAuth: { htpasswd: "root:$6$x$SecretHash" } }\n    backends: [{ host: "127.0.0.1:1" }]\n', { baseDir: dir })
    const inlineErrors = !inline.ok ? inline.diagnostics.map(d => d.message) : []
    assert.deepEqual(inlineErrors, ['line 1: unsupported hash (use bcrypt, apr1 or SHA)'])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
