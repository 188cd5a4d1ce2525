/**
 * A UDP echo server for tests that run it as its own process (a test host's network
 * namespace). Usage: node udp-echo-server.ts ADDRESS PORT SERVICE [NAMESPACE] — prints
 * "listening" when ready; answers every datagram, to the address and port it came from, with
 * JSON {request, namespace, service, pod} as the Gateway API conformance suite's UDP echo
 * (echo-basic with UDP_ECHO_SERVER) does, `pod` being SERVICE plus the source port seen.
 */

import dgram from 'node:dgram'

const [address, port, service, namespace = ''] = process.argv.slice(2) as [string, string, string, string | undefined]
const socket = dgram.createSocket('udp4')
socket.on('message', (msg, rinfo) => {
  const answer = JSON.stringify({ request: msg.toString('utf8'), namespace, service, pod: `${service}-${rinfo.port}` })
  socket.send(answer, rinfo.port, rinfo.address)
})
socket.bind(Number(port), address, () => process.stdout.write('listening\n'))
