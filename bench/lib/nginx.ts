/**
 * nginx (Debian's `nginx` / `nginx-light`) as the reference proxy: one process
 * (`master_process off`, so the process measured is the one serving), upstream keep-alive
 * to the backend (`keepalive`, HTTP/1.1, no `Connection` header passed on), no access log —
 * the set-up an operator would measure nginx with.
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

export async function startNginx (backendPort: number): Promise<Server> {
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
  scgi_temp_path ${dir}/scgi;
  upstream backend { server 127.0.0.1:${backendPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`)
  const child = await startNode({ name: 'nginx', command: NGINX, args: ['-c', conf, '-p', dir], readyPort: port })
  return { child, port, url: `http://127.0.0.1:${port}/` }
}
