/**
 * PorticoParameters → the deployer's proxy options. Unset fields keep the controller's
 * defaults (image from PROXY_IMAGE, one replica, a LoadBalancer Service); an image given in
 * parts replaces only those parts of the default reference.
 */

import type { ProxyParameters } from '../translate/gateway-api.ts'
import type { ProxyDeploymentOptions } from './render.ts'
import type { ControllerSettings } from '../settings.ts'

type Settings = Pick<ControllerSettings, 'proxyImage' | 'proxyImagePullPolicy'>
type ProxyOptions = Pick<ProxyDeploymentOptions, 'image' | 'imagePullPolicy' | 'replicas' | 'serviceType' | 'env' | 'resources' | 'logLevel' | 'workers'>

export function proxySettings (settings: Settings, parameters: ProxyParameters | undefined): ProxyOptions {
  const p = parameters ?? {}
  const out: ProxyOptions = { image: image(settings.proxyImage, p.image), imagePullPolicy: p.image?.pullPolicy ?? settings.proxyImagePullPolicy }
  if (p.replicas !== undefined) out.replicas = p.replicas
  if (p.service?.type !== undefined) out.serviceType = p.service.type
  // The proxy reads its config sections from JSON variables (proxy/settings.ts); a variable
  // of the same name in env wins, as it does over the controller's own.
  const sections = [['TRACING', p.tracing], ['ACCESS_LOG', p.accessLog]] as const
  const given = new Set((p.env ?? []).map(e => e.name))
  const generated = sections.filter(([name, v]) => v !== undefined && !given.has(name)).map(([name, v]) => ({ name, value: JSON.stringify(v) }))
  if (p.env !== undefined || generated.length > 0) out.env = [...generated, ...(p.env ?? [])]
  if (p.resources !== undefined) out.resources = p.resources
  if (p.logLevel !== undefined) out.logLevel = p.logLevel
  if (p.workers !== undefined) out.workers = p.workers
  return out
}

/** `registry/repository:tag` with the given parts replacing the default's. */
export function image (defaultRef: string, parts: ProxyParameters['image']): string {
  if (parts === undefined || (parts.registry === undefined && parts.repository === undefined && parts.tag === undefined)) return defaultRef
  const at = defaultRef.lastIndexOf(':')
  const hasTag = at > defaultRef.lastIndexOf('/')
  const name = hasTag ? defaultRef.slice(0, at) : defaultRef
  const slash = name.lastIndexOf('/')
  const registry = parts.registry ?? (slash >= 0 ? name.slice(0, slash) : '')
  const repository = parts.repository ?? (slash >= 0 ? name.slice(slash + 1) : name)
  const tag = parts.tag ?? (hasTag ? defaultRef.slice(at + 1) : 'latest')
  return `${registry === '' ? '' : `${registry}/`}${repository}:${tag}`
}
