/**
 * The command tree (commander):
 *
 *   porticoctl proxy trace [gateway/NAME] [--local] ... [-- URL [curl args]]
 *   porticoctl proxy config all|backends|models [gateway/NAME] [--local] [-o short|json|yaml]
 *   porticoctl proxy mesh [gateway/NAME] [--local] [-o short|json|yaml]
 *   porticoctl proxy log [gateway/NAME] [--local] [--level L]
 *   porticoctl controller log [-n NS] [--level L] [--set component=level]...
 *
 * Arguments after `--` (inject mode's URL and curl arguments) are split off before commander
 * sees the rest, so they are never taken for porticoctl's own options.
 */

import { Command, Option } from 'commander'
import { parseDurationMs } from './util/duration.ts'
import { usageError } from './errors.ts'
import type { Io } from './io.ts'
import { configCommand } from './config/command.ts'
import { OUTPUT_FORMATS, type OutputFormat } from './config/format.ts'
import { controllerLogCommand, CONTROLLER_COMPONENTS } from './log/controller.ts'
import { proxyLogCommand } from './log/proxy.ts'
import { meshCommand } from './mesh/command.ts'
import { controllerTarget, proxyTarget, type TargetFlags } from './targets/resolve.ts'
import { CONTROLLER_NAMESPACE } from './targets/pods.ts'
import { DEFAULT_CONTROLLER_ADMIN, DEFAULT_PROXY_ADMIN } from './targets/local.ts'
import { DEFAULT_LISTENER_PORT, traceCommand } from './trace/command.ts'
import { SUPPORTED_CURL_OPTIONS } from './trace/curl-args.ts'
import { version } from './version.ts'
import { wrap } from './util/wrap.ts'
import { HEALTH_EXPLAINED } from '@portico/trace-view'

export const DEFAULT_INJECT_TIMEOUT_MS = 60_000

export interface ProgramContext {
  io: Io
  /** The arguments after `--`. */
  passthrough: string[]
  /** Tests only: extra target flags (a fake port-forward). */
  targetFlags?: Partial<TargetFlags>
  /** The environment (process.env by default); tests run porticoctl in-process with their own. */
  env?: NodeJS.ProcessEnv
}

interface CommonFlags {
  local?: boolean
  adminAddr?: string
  namespace?: string
  kubeconfig?: string
  context?: string
}

export function parsePort (text: string): number {
  const n = Number(text)
  if (!/^\d+$/.test(text) || n < 1 || n > 65535) throw usageError(`invalid --port "${text}": a port number from 1 to 65535`)
  return n
}

/** `--timeout`: a duration (`500ms`, `30s`, `2m`) or seconds; 0 = wait forever. */
export function parseTimeout (text: string): number | null {
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) === 0 ? null : Number(text) * 1000
  const ms = parseDurationMs(text)
  if (ms === null) throw usageError(`invalid --timeout "${text}": use e.g. 30s, 500ms, 2m (0 waits forever)`)
  return ms === 0 ? null : ms
}

function addTargetOptions (cmd: Command, role: 'proxy' | 'controller'): Command {
  const defaultAdmin = role === 'proxy' ? DEFAULT_PROXY_ADMIN : DEFAULT_CONTROLLER_ADMIN
  return cmd
    .option('--local', `talk to a standalone instance on this machine instead of a cluster`)
    .option('--admin-addr <host:port>', `with --local: the admin server (default ${defaultAdmin})`)
    .option('-n, --namespace <ns>', role === 'proxy' ? 'the Gateway\'s namespace (default: the kubeconfig context\'s, else "default")' : `the control plane's namespace (default ${CONTROLLER_NAMESPACE})`)
    .option('--kubeconfig <file>', 'kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)')
    .option('--context <name>', 'kubeconfig context (default: the current one)')
}

function flagsOf (flags: CommonFlags, ctx: ProgramContext): TargetFlags {
  return { local: flags.local, adminAddr: flags.adminAddr, namespace: flags.namespace, kubeconfig: flags.kubeconfig, context: flags.context, env: ctx.env, ...ctx.targetFlags }
}

function noPassthrough (ctx: ProgramContext, command: string): void {
  if (ctx.passthrough.length > 0) throw usageError(`${command} takes no arguments after --`)
}

const TRACE_HELP = `
Modes:
  watch    porticoctl proxy trace --local
           waits for the next request any client sends, and shows its trace
  inject   porticoctl proxy trace --local -- http://example.test/api -H 'x-user: 1'
           arms the trace, then sends the request itself to 127.0.0.1:<--port> (in a
           cluster: through a port-forward to the proxy pod); the URL's host becomes the
           Host header and is never resolved. The request carries a unique
           x-porticoctl-trace header so exactly that request is traced.
  replay   porticoctl proxy trace -f trace.jsonl
           shows a trace saved with --raw

Curl arguments after the URL: ${SUPPORTED_CURL_OPTIONS}
  (-d @file strips newlines; --data-binary @file sends the file as is)

Output: --raw, or stdout not a terminal, prints JSON Lines (one event per line);
otherwise an interactive view: tab switches pane, arrows move/scroll, e/s/d pick the
detail mode (raw event, snapshot, diff against the previous snapshot), q quits.

Examples:
  porticoctl proxy trace --local --raw -- http://example.test/hello > trace.jsonl
  porticoctl proxy trace gateway/web -n apps -- https://shop.example.com/cart -k -X POST -d 'id=1'
  porticoctl proxy trace --local -- http://localhost:8080/health   (sent to listener port 8080)
  porticoctl proxy trace --local --port 8080 --timeout 10s -- shop.example.com/health`

export function buildProgram (ctx: ProgramContext): Command {
  const { io } = ctx
  const program = new Command('porticoctl')
  program
    .description('Inspect and control Portico proxies: trace requests, show config and backends, set log levels.')
    .version(`porticoctl ${version}`, '-V, --version')
    .exitOverride()
    .configureOutput({
      writeOut: s => { io.stdout.write(s) },
      writeErr: s => { io.stderr.write(s) },
      outputError: () => {}
    })
    .showSuggestionAfterError(true)

  const proxy = program.command('proxy').description('commands for the proxies (data plane)')

  addTargetOptions(proxy.command('trace').argument('[gateway]', 'gateway/NAME (in a cluster)'), 'proxy')
    .description('trace one request through a proxy: watch for the next one, or send one (-- URL [curl args])')
    .usage('[gateway/NAME | --local] [options] [-- URL [curl args]]')
    .option('--raw', 'print JSON Lines (one event record per line) instead of the interactive view')
    .option('--port <port>', `inject mode: the listener port to send to (default: the URL's port when it has one, else ${DEFAULT_LISTENER_PORT}, the quick start's)`)
    .option('-f, --file <file>', 'replay a trace saved with --raw (- for stdin)')
    .option('--timeout <duration>', `give up when the request has not finished after this long (default ${DEFAULT_INJECT_TIMEOUT_MS / 1000}s in inject mode; watch mode waits forever)`)
    .option('--path <path>', 'watch mode: only a request for this path (a trailing * matches a prefix)')
    .option('--route <route>', 'watch mode: only a request that selects this route')
    .addHelpText('after', TRACE_HELP)
    .action(async (gateway: string | undefined, flags: CommonFlags & { raw?: boolean, port?: string, file?: string, timeout?: string, path?: string, route?: string }) => {
      const inject = ctx.passthrough.length > 0
      const timeoutMs = flags.timeout !== undefined ? parseTimeout(flags.timeout) : inject ? DEFAULT_INJECT_TIMEOUT_MS : null
      const port = flags.port !== undefined ? parsePort(flags.port) : undefined
      const target = flags.file !== undefined && gateway === undefined && flags.local !== true ? null : proxyTarget(gateway, flagsOf(flags, ctx))
      await traceCommand({
        target,
        file: flags.file,
        raw: flags.raw === true,
        port,
        curlArgs: ctx.passthrough,
        timeoutMs,
        filter: { path: flags.path, route: flags.route },
        io
      })
    })

  const config = proxy.command('config').description('show what a proxy has loaded (from its /config_dump)')
  for (const section of ['all', 'backends', 'models'] as const) {
    const command = addTargetOptions(config.command(section).argument('[gateway]', 'gateway/NAME (in a cluster)'), 'proxy')
    if (section === 'backends') command.addHelpText('after', `\n${wrap(HEALTH_EXPLAINED, 80)}\n`)
    command
      .description(section === 'all'
        ? 'routes, backends, models and policies'
        : section === 'models'
          ? 'models (the model API): NAME MATCH VISIBILITY SERVES LISTENER ROUTE'
          : 'backends: TYPE NAME NAMESPACE ENDPOINT HEALTH (1.00 = every recent call succeeded) REQUESTS LATENCY')
      .usage('[gateway/NAME | --local] [options]')
      .addOption(new Option('-o, --output <format>', 'output format').choices(OUTPUT_FORMATS).default('short'))
      .action(async (gateway: string | undefined, flags: CommonFlags & { output: OutputFormat }) => {
        noPassthrough(ctx, `proxy config ${section}`)
        await configCommand({ target: proxyTarget(gateway, flagsOf(flags, ctx)), section, output: flags.output, io })
      })
  }

  addTargetOptions(proxy.command('mesh').argument('[gateway]', 'gateway/NAME (in a cluster)'), 'proxy')
    .description('the mesh identity (Istio ambient): STATE (pending, ready, failed), IDENTITY (SPIFFE ID), EXPIRES, SOURCE, REASON')
    .usage('[gateway/NAME | --local] [options]')
    .addOption(new Option('-o, --output <format>', 'output format').choices(OUTPUT_FORMATS).default('short'))
    .action(async (gateway: string | undefined, flags: CommonFlags & { output: OutputFormat }) => {
      noPassthrough(ctx, 'proxy mesh')
      await meshCommand({ target: proxyTarget(gateway, flagsOf(flags, ctx)), output: flags.output, io })
    })

  addTargetOptions(proxy.command('log').argument('[gateway]', 'gateway/NAME (in a cluster)'), 'proxy')
    .description('show the log level of every matching proxy, or set it with --level')
    .usage('[gateway/NAME | --local] [--level LEVEL]')
    .option('--level <filter>', 'set the level: error, warn, info, debug, trace, off, or a filter such as info,engine=debug')
    .action(async (gateway: string | undefined, flags: CommonFlags & { level?: string }) => {
      noPassthrough(ctx, 'proxy log')
      await proxyLogCommand({ target: proxyTarget(gateway, flagsOf(flags, ctx)), level: flags.level, io })
    })

  const controller = program.command('controller').description('commands for the controller (control plane)')
  addTargetOptions(controller.command('log'), 'controller')
    .description(`show the controller's log levels per component, or set them (components: ${CONTROLLER_COMPONENTS.join(', ')})`)
    .usage('[-n NAMESPACE | --local] [--level LEVEL] [--set component=level]...')
    .option('--level <level>', 'set every component\'s level')
    .option('--set <component=level>', 'set one component\'s level (repeatable)', (value: string, previous: string[]) => [...previous, value], [] as string[])
    .action(async (flags: CommonFlags & { level?: string, set: string[] }) => {
      noPassthrough(ctx, 'controller log')
      await controllerLogCommand({ target: controllerTarget(flagsOf(flags, ctx)), level: flags.level, set: flags.set, io })
    })

  return program
}
