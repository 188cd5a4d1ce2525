#!/usr/bin/env node
import { main } from '../src/main.ts'

const code = await main(process.argv.slice(2))
// Exit once stdout has drained, even if a socket (a port-forward, a keep-alive) lingers.
process.stdout.write('', () => process.exit(code))
