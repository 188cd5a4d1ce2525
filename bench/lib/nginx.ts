/**
 * nginx (Debian's `nginx` / `nginx-light`), one process (`master_process off`, so the
 * process measured is the one serving), no access log:
 *   - `startNginx`, the reference proxy: upstream keep-alive to the backend (`keepalive`,
 *     HTTP/1.1, no `Connection` header passed on) — the set-up an operator would measure
 *     nginx with;
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

export function startNginx (backendPort: number): Promise<Server> {
  return nginx('nginx', `
  upstream backend { server 127.0.0.1:${backendPort}; keepalive 64; }`, `
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }`)
}

/**
 * nginx as the *backend*: `200 hello world` (the same 12 bytes as bench/servers/backend.ts)
 * from the config, every connection kept for good. A backend in C takes a fraction of the
 * CPU a node:http one does, which matters on 2 cores where the backend shares a CPU with
 * what is not being measured (bench/tracing.ts --backend nginx).
 */
export function startNginxBackend (): Promise<Server> {
  return nginx('nginx backend', '', `
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    location / {
      default_type text/plain;
      return 200 "hello world\\n";
    }`)
}

/** One nginx process, `http { <upstreams> server { listen <port>; <server> } }`, in a scratch folder. */
async function nginx (name: string, upstreams: string, server: string): Promise<Server> {
  const port = await freePort()
  const dir = scratchDir('nginx')
  const conf = join(dir, 'nginx.conf')
  writeFileSync(conf, `daemon off;
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
`)
  const child = await startNode({ name, command: NGINX, args: ['-c', conf, '-p', dir], readyPort: port })
  return { child, port, url: `http://127.0.0.1:${port}/` }
}
