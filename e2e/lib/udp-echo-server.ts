/**
 * A UDP echo server for tests that run it as its own process (a test host's network
 * namespace, or a pod of the conformance harness). Usage:
 *   node udp-echo-server.ts ADDRESS PORT SERVICE [NAMESPACE]
 *   node udp-echo-server.ts            (as echo-basic with UDP_ECHO_SERVER: 0.0.0.0:8080, and
 *                                       SERVICE_NAME, NAMESPACE, POD_NAME from the environment)
 * Prints "listening" when ready; answers every datagram, to the address and port it came
 * from, with JSON {request, namespace, service, pod} — the answer the Gateway API v1.7.0
 * suite's UDP tests parse (conformance/utils/udp: `service`, `namespace`; the weighted test
 * reads `pod`).
 */

import dgram from 'node:dgram'

const argv = process.argv.slice(2)
const address = argv[0] ?? '0.0.0.0'
const port = Number(argv[1] ?? 8080)
const service = argv[2] ?? process.env.SERVICE_NAME ?? ''
const namespace = argv[3] ?? process.env.NAMESPACE ?? ''
const pod = process.env.POD_NAME
const socket = dgram.createSocket(address.includes(':') ? 'udp6' : 'udp4')
socket.on('message', (msg, rinfo) => {
  const answer = JSON.stringify({ request: msg.toString('utf8'), namespace, service, pod: pod ?? `${service}-${rinfo.port}` })
  socket.send(answer, rinfo.port, rinfo.address)
})
socket.bind(port, address, () => process.stdout.write('listening\n'))
