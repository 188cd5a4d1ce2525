/**
 * Whether a URL the gateway would call points at the gateway's own host or the cloud's
 * metadata service: loopback, link-local (169.254.0.0/16, fe80::/10, which holds the AWS /
 * GCP / Azure metadata address 169.254.169.254), the unspecified address, and the metadata
 * names. In a cluster a model's baseURL comes from a namespace's users, so such a URL would
 * let them reach what only the gateway's pod should (SSRF); the controller refuses it
 * (config/models-to-ir.ts with refuseLocalBaseURL). Private ranges (10/8, ...) are not
 * refused: a model served inside the cluster lives there.
 *
 * The host is read by the WHATWG URL parser, the one Node's HTTP client uses, so every IPv4
 * spelling it accepts (127.1, 2130706433, 0x7f.0.0.1, 0177.0.0.1) is checked as the address
 * it becomes; a trailing dot (localhost.) is dropped as DNS drops it. Names other than the
 * listed ones are not resolved here (a DNS answer can change after the check).
 */

/** Host names that are the local host or a metadata service whatever DNS says. */
const LOCAL_NAMES = new Set(['localhost', 'metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data', 'instance-data.ec2.internal'])

/** Null when the URL may be called, else why not. */
export function ssrfRefusal (url: string): string | null {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return 'is not a URL'
  }
  let host = parsed.hostname.toLowerCase()
  while (host.endsWith('.')) host = host.slice(0, -1)
  if (host.startsWith('[') && host.endsWith(']')) return ipv6Refusal(host.slice(1, -1))
  if (LOCAL_NAMES.has(host) || host.endsWith('.localhost')) return `points at ${host}, the gateway's own host or a metadata service`
  const v4 = ipv4Of(host)
  return v4 === null ? null : ipv4Refusal(v4)
}

/** The four octets of a dotted-decimal address (the URL parser has already normalised every other IPv4 spelling). */
function ipv4Of (host: string): number[] | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host)
  if (m === null) return null
  const octets = m.slice(1).map(Number)
  return octets.every(o => o <= 255) ? octets : null
}

function ipv4Refusal ([a, b]: number[]): string | null {
  if (a === 127) return 'points at a loopback address (127.0.0.0/8)'
  if (a === 0) return 'points at the unspecified address (0.0.0.0/8: this host)'
  if (a === 169 && b === 254) return 'points at a link-local address (169.254.0.0/16, where cloud metadata services answer)'
  if (a === 100 && b === 100) return 'points at 100.100.0.0/16 (Alibaba Cloud\'s metadata service)'
  return null
}

function ipv6Refusal (host: string): string | null {
  const groups = expandIpv6(host)
  if (groups === null) return null
  if (groups.every(g => g === 0)) return 'points at the unspecified address (::)'
  if (groups.slice(0, 7).every(g => g === 0) && groups[7] === 1) return 'points at the loopback address (::1)'
  if ((groups[0]! & 0xffc0) === 0xfe80) return 'points at a link-local address (fe80::/10)'
  // fd00:ec2::254: the AWS metadata service over IPv6.
  if (groups[0] === 0xfd00 && groups[1] === 0x0ec2) return 'points at the AWS metadata service (fd00:ec2::/32)'
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses reach the IPv4 host.
  if (groups.slice(0, 5).every(g => g === 0) && (groups[5] === 0xffff || groups[5] === 0)) {
    return ipv4Refusal([groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff])
  }
  return null
}

/** Eight 16-bit groups of an IPv6 address as the URL parser prints it (compressed, hex, maybe with a dotted IPv4 tail). */
function expandIpv6 (host: string): number[] | null {
  let text = host
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted !== null) {
    const v4 = ipv4Of(dotted[1]!)
    if (v4 === null) return null
    text = text.slice(0, -dotted[1]!.length) + `${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`
  }
  const halves = text.split('::')
  if (halves.length > 2) return null
  const parse = (s: string) => s === '' ? [] : s.split(':').map(g => parseInt(g, 16))
  const head = parse(halves[0]!)
  const tail = halves.length === 2 ? parse(halves[1]!) : []
  const missing = 8 - head.length - tail.length
  if (missing < 0 || (halves.length === 1 && missing !== 0)) return null
  const out = [...head, ...new Array<number>(missing).fill(0), ...tail]
  return out.some(g => !Number.isInteger(g) || g < 0 || g > 0xffff) ? null : out
}
