/**
 * Where a command's proxies (or the controller) are: a standalone instance on this machine
 * (`--local`, an admin address) or pods in a cluster reached through port-forwards. Commands
 * only see `Target` and `Instance`, so each runs the same way over both.
 */

export interface Address {
  host: string
  port: number
}

/** One proxy (or controller) whose admin server we can talk to. */
export interface Instance {
  /** How output and errors name it: the admin address (`127.0.0.1:15000`) or `pod.namespace`. */
  label: string
  /** Base URL of its admin server from here, e.g. `http://127.0.0.1:15000` (maybe a forward). */
  adminUrl: string
  /** The message when the admin server cannot be reached. */
  unreachable: string
  /**
   * Where port `port` of the same instance answers from here: `127.0.0.1:port` locally, a
   * fresh port-forward in a cluster (closed with the connection). Inject mode sends its
   * request there.
   */
  reach(port: number): Promise<Address>
}

export interface Connection {
  /** At least one. */
  instances: Instance[]
  /** Closes every port-forward this connection opened. Safe to call twice. */
  close(): Promise<void>
}

export interface Target {
  kind: 'local' | 'cluster'
  /** For messages: `127.0.0.1:15000`, `gateway default/web`, `controller in portico-system`. */
  description: string
  /**
   * Resolves the instances: `all` asks for every ready pod (log commands); otherwise one
   * (trace, config). Throws the "no kubeconfig", "gateway not found", "no ready pod" errors.
   */
  connect(options: { all: boolean }): Promise<Connection>
}
