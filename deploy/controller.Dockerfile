# syntax=docker/dockerfile:1
# The `controller` image: Portico's control plane (packages/controller).
#
#   docker build -f deploy/controller.Dockerfile -t ghcr.io/portico-dev/controller:0.1.0 .
#
# Built from the repository root. Node runs the TypeScript sources directly (type stripping),
# which it refuses to do under node_modules/, so the image keeps the workspace's layout:
# packages/<name>/ next to their node_modules links, as in a clone, holding only what the
# controller's module graph reaches (scripts/runtime-tree.ts), its production dependencies
# and protos/.

ARG NODE_IMAGE=node:24.21.0-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV CI=true
# pnpm at the version package.json pins (packageManager), installed with npm as scripts/setup does.
COPY package.json ./
RUN npm install --global --no-audit --no-fund --loglevel=error \
      "pnpm@$(node -p 'require("./package.json").packageManager.split("@")[1]')"
# Every package of the lockfile into pnpm's store: this layer changes only with the lockfile.
COPY pnpm-lock.yaml pnpm-workspace.yaml .npmrc ./
RUN --mount=type=cache,id=portico-pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm fetch --prod
COPY . .
# Production dependencies of the controller and of the workspace packages it imports (pnpm
# adds the workspace root's; runtime-tree leaves them out), then the runtime tree in /out.
RUN --mount=type=cache,id=portico-pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm install --offline --frozen-lockfile --prod --filter "@portico/controller..." \
    && node scripts/runtime-tree.ts @portico/controller /out
# Fail the build, not the pod, if a module does not resolve: load the entry's module graph.
RUN node --input-type=module -e "await import('/out/packages/controller/src/main.ts')"

FROM ${NODE_IMAGE} AS runtime
# Minimal runtime: Node alone (no npm, npx, corepack or yarn) and an unprivileged user whose
# numeric id lets Kubernetes verify runAsNonRoot (the chart runs the pod as 10101). The
# application files stay owned by root, so the process cannot modify them.
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx \
      /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* \
    && groupadd --gid 10101 portico \
    && useradd --uid 10101 --gid 10101 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin portico
WORKDIR /app
COPY --from=build /out/ /app/
ENV NODE_ENV=production
USER 10101:10101
# xDS (config push), health (/readyz, /healthz), metrics (/metrics); admin stays on loopback.
EXPOSE 9978 9093 9092
ENTRYPOINT ["node", "/app/packages/controller/bin/portico-controller.ts"]
