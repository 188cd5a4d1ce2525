/**
 * Builds the admin web UI into dist/, which the proxy's admin server serves at /ui (so the
 * base is /ui/). Everything is bundled: the page loads nothing from outside the admin server.
 * `pnpm --filter @portico/ui dev` serves it with hot reload and forwards /api, /config_dump,
 * /debug and /logging to an admin server (PORTICO_ADMIN, default http://127.0.0.1:15000).
 */
import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

const admin = process.env.PORTICO_ADMIN ?? 'http://127.0.0.1:15000'

export default defineConfig({
  base: '/ui/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1024
  },
  server: {
    // The admin API is same-origin only: forwarded requests drop the dev server's Origin.
    proxy: Object.fromEntries(['/api', '/config_dump', '/debug', '/logging'].map(p => [p, {
      target: admin,
      changeOrigin: true,
      configure: (proxy: { on(event: 'proxyReq', f: (req: { removeHeader(name: string): void }) => void): void }) => {
        proxy.on('proxyReq', req => req.removeHeader('origin'))
      }
    }]))
  }
})
