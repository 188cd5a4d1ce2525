import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { translate, type ClusterState } from '../src/translate/translate.ts'

// Cluster objects in golden/*.yaml → translation result in golden/*.out.json.
// Regenerate with UPDATE_GOLDEN=1 and review the diff.
const dir = new URL('./golden/', import.meta.url).pathname

export function clusterState (text: string): ClusterState {
  const state: ClusterState = { gatewayClasses: [], gateways: [], httpRoutes: [], referenceGrants: [], services: [], endpointSlices: [], secrets: [], namespaces: [], parameters: [] }
  const lists: Record<string, keyof ClusterState> = {
    GatewayClass: 'gatewayClasses', Gateway: 'gateways', HTTPRoute: 'httpRoutes', ReferenceGrant: 'referenceGrants',
    Service: 'services', EndpointSlice: 'endpointSlices', Secret: 'secrets', Namespace: 'namespaces',
    PorticoParameters: 'parameters'
  }
  for (const doc of parseAllDocuments(text)) {
    const obj = doc.toJS() as { kind: string }
    const list = lists[obj.kind]
    if (list === undefined) throw new Error(`unexpected kind ${obj.kind}`)
    ;(state[list] as unknown[] | undefined)?.push(obj)
  }
  return state
}

for (const file of readdirSync(dir).filter(f => f.endsWith('.yaml'))) {
  test(`translate: ${file}`, () => {
    const result = translate(clusterState(readFileSync(join(dir, file), 'utf8')), { controllerName: 'portico.dev/gateway-controller' })
    const actual = JSON.stringify(result, null, 2) + '\n'
    const golden = join(dir, file.replace(/\.yaml$/, '.out.json'))
    if (process.env.UPDATE_GOLDEN === '1' || !existsSync(golden)) writeFileSync(golden, actual)
    assert.equal(actual, readFileSync(golden, 'utf8'))
  })
}
