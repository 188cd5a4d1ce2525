/**
 * nginx (Debian's `nginx` / `nginx-light`), one process (`master_process off`, so the
 * process measured is the one serving), no access log:
 *   - `startNginx`, the reference proxy: upstream keep-alive to the backend (`keepalive`,
 *     HTTP/1.1, no `Connection` header passed on) and proxy buffers sized for the bodies
 *     measured (`NGINX_BUFFERING`) — the set-up an operator would measure nginx with;
 *   - `startNginxBackend`, a backend that costs its CPU little.
 */

import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { freePort, scratchDir, startNode } from './children.ts'
import type { Server } from './servers.ts'

const NGINX = process.env.NGINX ?? 'nginx'

export function hasNginx (): Promise<boolean> {
  return new Promise(resolve => execFile(NGINX, ['-v'], err => resolve(err === null)))
}

/**
 * How the reference buffers the backend's answer (issue 54):
 *   - `sized` (the reference): buffers that hold a 64 KiB answer whole, as an operator
 *     proxying such bodies sets them;
 *   - `default`: nginx's defaults (`proxy_buffer_size 4k; proxy_buffers 8 4k`, 36 KiB in
 *     memory), under which the rest of a 64 KiB answer goes through a temporary file and
 *     nginx's CPU per request doubled — what the published ratios before issue 54 used;
 *   - `off`: the same sizes with `proxy_buffering off`: the answer passed on as it arrives,
 *     through the one `proxy_buffer_size` buffer (the streaming set-up).
 */
export const NGINX_BUFFERING = {
  sized: `
      proxy_buffer_size 16k;
      proxy_buffers 8 16k;
      proxy_busy_buffers_size 64k;`,
  default: '',
  off: `
      proxy_buffering off;
      proxy_buffer_size 16k;
      proxy_buffers 8 16k;
      proxy_busy_buffers_size 64k;`
} as const
export type NginxBuffering = keyof typeof NGINX_BUFFERING

export function startNginx (backendPort: number, buffering: NginxBuffering = 'sized'): Promise<Server> {
  return nginx(`nginx (buffers ${buffering})`, (dir, port) => nginxConfig(dir, port, backendPort, buffering))
}

/** The whole nginx.conf of the reference proxy listening on `port` in folder `dir` (bench/body-instructions.ts runs it under callgrind). */
export function nginxConfig (dir: string, port: number, backendPort: number, buffering: NginxBuffering): string {
  return configText(dir, port, `
  upstream backend { server 127.0.0.1:${backendPort}; keepalive 64; }`, `
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";${NGINX_BUFFERING[buffering]}
    }`)
}

/**
 * nginx as the *backend*: `200 hello world` (the same 12 bytes as bench/servers/backend.ts)
 * from the config, every connection kept for good. A backend in C takes a fraction of the
 * CPU a node:http one does, which matters on 2 cores where the backend shares a CPU with
 * what is not being measured (bench/tracing.ts --backend nginx).
 */
export function startNginxBackend (): Promise<Server> {
  return nginx('nginx backend', (dir, port) => configText(dir, port, '', `
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    location / {
      default_type text/plain;
      return 200 "hello world\\n";
    }`))
}

/** One nginx process from the config `conf(dir, port)` gives, in a scratch folder. */
async function nginx (name: string, conf: (dir: string, port: number) => string): Promise<Server> {
  const port = await freePort()
  const dir = scratchDir('nginx')
  const file = join(dir, 'nginx.conf')
  writeFileSync(file, conf(dir, port))
  const child = await startNode({ name, command: NGINX, args: ['-c', file, '-p', dir], readyPort: port })
  return { child, port, url: `http://127.0.0.1:${port}/` }
}

/** `http { <upstreams> server { listen <port>; <server> } }`, one process, its files in `dir`. */
function configText (dir: string, port: number, upstreams: string, server: string): string {
  return `daemon off;
master_process off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;${upstreams}
  server {
    listen 127.0.0.1:${port};${server}
  }
}
`
}
