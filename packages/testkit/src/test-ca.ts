/**
 * Certificates for tests, made by openssl at test time: a self-signed CA, leaves it signs
 * (with subjectAltNames and other extensions), and self-signed certificates. Each is written
 * to a directory the caller owns (a temp dir from `makeTempDir`) as `<name>.pem` and
 * `<name>.key`, and handed back as paths and PEM text. One place for the openssl command
 * lines, so a test says which certificates it needs, not how openssl makes them.
 */

import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** `ec`: P-256 (cheap handshakes; the default); `rsa`: 2048 bits. */
export type TestKeyType = 'ec' | 'rsa'

export interface PemFiles {
  certFile: string
  keyFile: string
  cert: string
  key: string
}

export interface CertOptions {
  /** The subject in openssl's `/CN=…` form (default `/CN=<name>`). */
  subject?: string
  /** subjectAltName entries in openssl's form: `DNS:a.test`, `IP:127.0.0.1`, `URI:spiffe://…`. */
  sans?: string[]
  /** Other extensions, one `name=value` each (`extendedKeyUsage=clientAuth`). */
  extensions?: string[]
  key?: TestKeyType
  /** The files' names in the directory, where a config names them (default `<name>.pem`, `<name>.key`). */
  files?: { cert: string, key: string }
}

export interface CertAuthority extends PemFiles {
  dir: string
  /** A leaf this CA signs, as `<name>.pem` / `<name>.key` in the CA's directory. */
  issue: (name: string, options?: CertOptions) => PemFiles
}

function openssl (dir: string, args: string[]): void {
  // 30 s: an RSA key on a loaded 2-core machine can take seconds.
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore', timeout: 30_000 })
}

function newKey (type: TestKeyType = 'ec'): string[] {
  return type === 'rsa'
    ? ['-newkey', 'rsa:2048', '-nodes', '-sha256']
    : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-sha256']
}

function extensionLines (options: CertOptions): string[] {
  const lines = [...options.extensions ?? []]
  if (options.sans !== undefined && options.sans.length > 0) lines.unshift(`subjectAltName=${options.sans.join(',')}`)
  return lines
}

function fileNames (name: string, options: CertOptions): { cert: string, key: string } {
  return options.files ?? { cert: `${name}.pem`, key: `${name}.key` }
}

function read (dir: string, files: { cert: string, key: string }): PemFiles {
  const certFile = join(dir, files.cert)
  const keyFile = join(dir, files.key)
  return { certFile, keyFile, cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') }
}

/**
 * A self-signed certificate (its own issuer; openssl's defaults make it a CA too), with the
 * options' subjectAltNames and extensions.
 */
export function selfSignedCert (dir: string, name: string, options: CertOptions = {}): PemFiles {
  const extensions = extensionLines(options).flatMap(line => ['-addext', line])
  const files = fileNames(name, options)
  openssl(dir, ['req', '-x509', ...newKey(options.key), '-days', '1', '-keyout', files.key, '-out', files.cert, '-subj', options.subject ?? `/CN=${name}`, ...extensions])
  return read(dir, files)
}

/** A self-signed CA as `<name>.pem` / `<name>.key` in `dir`, and what issues leaves under it. */
export function createTestCa (dir: string, name = 'ca', options: Pick<CertOptions, 'subject' | 'key' | 'files' | 'extensions'> = {}): CertAuthority {
  const ca = selfSignedCert(dir, name, options)
  const caFiles = fileNames(name, options)
  return {
    ...ca,
    dir,
    issue (leaf, leafOptions = {}) {
      const files = fileNames(leaf, leafOptions)
      openssl(dir, ['req', ...newKey(leafOptions.key ?? options.key), '-keyout', files.key, '-out', `${leaf}.csr`, '-subj', leafOptions.subject ?? `/CN=${leaf}`])
      const lines = extensionLines(leafOptions)
      const extfile: string[] = []
      if (lines.length > 0) {
        writeFileSync(join(dir, `${leaf}.ext`), lines.join('\n') + '\n')
        extfile.push('-extfile', `${leaf}.ext`)
      }
      openssl(dir, ['x509', '-req', '-in', `${leaf}.csr`, '-CA', caFiles.cert, '-CAkey', caFiles.key, '-CAcreateserial', '-sha256', '-days', '1', '-out', files.cert, ...extfile])
      return read(dir, files)
    }
  }
}
