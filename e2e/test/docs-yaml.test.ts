/**
 * Every fenced YAML block of README.md and docs/*.md is checked, so the docs cannot drift
 * from what Portico accepts. A block is a whole Portico config, run through
 * `portico --validate` as printed, unless an HTML comment on the line before the fence says
 * otherwise (GitHub does not render it):
 *
 *   <!-- docs-yaml: policies -->        a fragment: a `policies` block; validated inside a
 *                                       route of a config with a gateway and a backend
 *   <!-- docs-yaml: files=a.pem,b.key --> files the block names, made here first (a private
 *                                       key when the name has "key" in it — a service-account
 *                                       key for a .json —, a certificate for other .pem/.crt,
 *                                       an htpasswd file, a JWKS, a one-line API key for .txt)
 *   <!-- docs-yaml: kubernetes -->      Kubernetes resources: each document checked against
 *                                       its CRD's schema (Portico's generated ones, and the
 *                                       Gateway API's from ./scripts/kube-tools)
 *   <!-- docs-yaml: other (why) -->     not Portico's (another program's config): parsed only
 */

import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { Ajv } from 'ajv'
import { parse, parseAllDocuments } from 'yaml'
import { configJsonSchema } from '@portico/engine'
import { makeTempDir, REPO_ROOT, runPortico } from '@portico/testkit/portico'
import { selfSignedCert } from '@portico/testkit/test-ca'
import { findKubeTools } from '../cluster/harness.ts'
import { porticoBackendCrd, porticoModelCrd, porticoPolicyCrd } from '@portico/controller/crds'

interface Block {
  file: string
  line: number
  text: string
  kind: 'config' | 'policies' | 'kubernetes' | 'other'
  files: string[]
}

const MARKER = /^<!-- docs-yaml: (.*) -->$/

function blocks (): Block[] {
  const files = ['README.md', ...readdirSync(join(REPO_ROOT, 'docs')).filter(f => f.endsWith('.md')).sort().map(f => `docs/${f}`)]
  const out: Block[] = []
  for (const file of files) {
    const lines = readFileSync(join(REPO_ROOT, file), 'utf8').split('\n')
    for (let i = 0; i < lines.length; i++) {
      // A fence may be indented (an example inside a list item): its lines are, as much.
      const open = /^( *)```(\S*)/.exec(lines[i]!)
      if (open === null) continue
      const indent = open[1]!
      const end = lines.findIndex((l, j) => j > i && l.startsWith(indent + '```'))
      assert.ok(end > i, `${file}:${i + 1}: unclosed code fence`)
      if (open[2] === 'yaml' || open[2] === 'yml') {
        const marker = MARKER.exec((lines[i - 1] ?? '').trim())?.[1] ?? ''
        const words = marker.split(/\s+/).filter(w => w !== '')
        const kind = (['policies', 'kubernetes', 'other'] as const).find(k => words[0] === k) ?? 'config'
        const files = words.find(w => w.startsWith('files='))?.slice('files='.length).split(',') ?? []
        out.push({ file, line: i + 1, text: lines.slice(i + 1, end).map(l => l.slice(indent.length)).join('\n') + '\n', kind, files })
      }
      i = end
    }
  }
  return out
}

const all = blocks()

test('the docs have YAML examples to check', () => {
  assert.ok(all.length >= 20, `found ${all.length}`)
})

// Made once: what a block's files= asks for.
let pki: { cert: string, key: string } | undefined
function makeFile (dir: string, name: string): void {
  const path = join(dir, name)
  mkdirSync(dirname(path), { recursive: true })
  if (name.endsWith('.htpasswd')) {
    writeFileSync(path, 'alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n')
    return
  }
  // A provider's API key in a file (backendAuth.key: {file}): one line.
  if (name.endsWith('.txt')) {
    writeFileSync(path, 'sk-docs-example-key\n')
    return
  }
  if (name.endsWith('.json') && !/key/i.test(name.split('/').pop()!)) {
    writeFileSync(path, JSON.stringify({ keys: [] }))
    return
  }
  if (pki === undefined) {
    const tmp = makeTempDir('portico-docs-pki-')
    try {
      const { cert, key } = selfSignedCert(tmp, 'docs', { subject: '/CN=docs.example', key: 'rsa' })
      pki = { cert, key }
    } finally {
      rmSync(tmp, { recursive: true, force: true })
    }
  }
  // A JSON key file is a Google Cloud service-account key (backendAuth.gcp.credential).
  if (name.endsWith('.json')) writeFileSync(path, JSON.stringify({ type: 'service_account', client_email: 'docs@docs-example.iam.gserviceaccount.com', private_key: pki.key }))
  else writeFileSync(path, /key/i.test(name.split('/').pop()!) ? pki.key : pki.cert)
}

/** A policies fragment inside the smallest config that can hold it. */
function completePolicies (fragment: string): string {
  const indented = fragment.trimEnd().split('\n').map(l => `      ${l}`).join('\n')
  return `gateways:\n  default: { port: 3000 }\nroutes:\n  - name: docs\n    backends: [{ host: 127.0.0.1:8080 }]\n    policies:\n${indented}\n`
}

// A process per block, a few at a time.
describe('Portico configs in the docs', { concurrency: 4 }, () => {
  for (const block of all.filter(b => b.kind === 'config' || b.kind === 'policies')) {
    test(`${block.file}:${block.line} validates (${block.kind === 'config' ? 'as printed' : 'a policies fragment, in a route'})`, async () => {
      const dir = makeTempDir('portico-docs-yaml-')
      try {
        for (const name of block.files) makeFile(dir, name)
        const text = block.kind === 'config' ? block.text : completePolicies(block.text)
        const path = join(dir, 'config.yaml')
        writeFileSync(path, text)
        const result = await runPortico(['--validate', '-f', path])
        assert.equal(result.code, 0, `${block.file}:${block.line}:\n${result.stderr}\n--- checked ---\n${text}`)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })
  }
})

for (const block of all.filter(b => b.kind === 'other')) {
  test(`${block.file}:${block.line} parses (not a Portico config)`, () => {
    assert.doesNotThrow(() => parse(block.text))
  })
}

const kubeBlocks = all.filter(b => b.kind === 'kubernetes')
if (kubeBlocks.length > 0) {
  test('Kubernetes examples match their CRDs', t => {
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false })
    const config = configJsonSchema()
    const schemas = new Map<string, unknown>()
    for (const crd of [porticoPolicyCrd(config), porticoBackendCrd(config), porticoModelCrd(config)] as Array<Record<string, any>>) addCrd(schemas, crd)
    const crdDir = findKubeTools().gatewayApiCrds
    if (crdDir !== undefined) {
      for (const f of readdirSync(crdDir).filter(n => n.endsWith('.yaml'))) {
        for (const doc of parseAllDocuments(readFileSync(join(crdDir, f), 'utf8'))) addCrd(schemas, doc.toJS())
      }
    }
    for (const block of kubeBlocks) {
      for (const doc of parseAllDocuments(block.text)) {
        assert.deepEqual(doc.errors, [], `${block.file}:${block.line}`)
        const obj = doc.toJS() as { apiVersion: string, kind: string, metadata?: { name?: string } }
        const where = `${block.file}:${block.line}: ${obj.kind} ${obj.metadata?.name ?? ''}`
        assert.ok(typeof obj.metadata?.name === 'string', `${where}: metadata.name`)
        const schema = schemas.get(`${obj.apiVersion}/${obj.kind}`)
        if (schema === undefined && obj.apiVersion.startsWith('gateway.networking.k8s.io/') && crdDir === undefined) {
          const why = 'Gateway API CRDs not found: run ./scripts/kube-tools'
          if (process.env.CI === 'true') throw new Error(why)
          t.diagnostic(`${where}: not checked (${why})`)
          continue
        }
        assert.ok(schema !== undefined, `${where}: no CRD for ${obj.apiVersion} ${obj.kind}`)
        const validate = ajv.compile(schema as object)
        assert.ok(validate(obj), `${where}: ${ajv.errorsText(validate.errors)}`)
      }
    }
  })
}

function addCrd (schemas: Map<string, unknown>, crd: Record<string, any>): void {
  if (crd?.kind !== 'CustomResourceDefinition') return
  for (const v of crd.spec.versions as Array<{ name: string, schema?: { openAPIV3Schema: unknown } }>) {
    if (v.schema !== undefined) schemas.set(`${crd.spec.group}/${v.name}/${crd.spec.names.kind}`, v.schema.openAPIV3Schema)
  }
}
