export { protocol, RESOURCE_TYPE_URL, PROTOS_DIR } from './protos.ts'
export { encodeResources, decodeResource, assembleIR, bindName, backendName, type EncodedResource, type DecodedResource } from './resources.ts'
export { encodeStruct, decodeStruct, type JsonObject } from './struct.ts'
export type { DeltaDiscoveryRequest, DeltaDiscoveryResponse, XdsNode } from './messages.ts'
