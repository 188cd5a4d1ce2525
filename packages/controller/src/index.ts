export { translate, type ClusterState, type TranslateOptions, type TranslationResult, type GatewayResult, type RouteResult } from './translate/translate.ts'
export { XdsServer, type XdsServerHooks, type ProxyIdentity } from './xds/server.ts'
export { startXdsListener, type XdsMode, type XdsListener } from './xds/listener.ts'
export { createCa, createServingCert, type Pem } from './xds/certs.ts'
