/**
 * A small type checker for Portico's CEL expressions: finds, when a config loads, an
 * expression that can never evaluate -- `request.path + 1`, `request.pth == "/a"`,
 * `size(source.port)`, an authorization rule that yields a string -- so it is a config error
 * naming the rule instead of a 403 (or a dropped log field) on every request.
 *
 * @bufbuild/cel ships a Checker, but in 0.6.1 it types only constants and identifiers (any
 * other node throws "Unsupported expression kind") and is not exported; cel-go's checker is
 * the model here. It is deliberately conservative: a type it cannot know is `dyn`, and `dyn`
 * fits everywhere, so only expressions that fail for every request are refused. A claim of a
 * JWT (`jwt.n + 1`), a header missing at run time or a null `apiKey` stay run-time matters.
 *
 * The variables' shapes are those cel/vars.ts builds. Numbers the proxy passes as JavaScript
 * numbers (source.port) are `number`: CEL sees them as double, but which of int, uint or
 * double a number field holds is not promised to users, so none of them is an error.
 */

/** A CEL type as far as the checker knows it. `number` is some numeric type (int, uint or double). */
export type CelCheckType =
  | { kind: 'dyn' | 'null' | 'bool' | 'int' | 'uint' | 'double' | 'number' | 'string' | 'bytes' | 'timestamp' | 'duration' | 'type' }
  | { kind: 'list', elem: CelCheckType }
  | { kind: 'map', value: CelCheckType }
  | { kind: 'object', name: string, fields: Record<string, CelCheckType> }

const DYN: CelCheckType = { kind: 'dyn' }
const BOOL: CelCheckType = { kind: 'bool' }
const INT: CelCheckType = { kind: 'int' }
const STRING: CelCheckType = { kind: 'string' }
const NUMBER: CelCheckType = { kind: 'number' }
const STRING_MAP: CelCheckType = { kind: 'map', value: STRING }
const DYN_MAP: CelCheckType = { kind: 'map', value: DYN }

const object = (name: string, fields: Record<string, CelCheckType>): CelCheckType => ({ kind: 'object', name, fields })
const MCP_ITEM = object('mcp item', { name: STRING, target: STRING })

/** The shapes cel/vars.ts gives the variables. A variable not named here is dyn. */
export const CEL_VARIABLE_TYPES: Readonly<Record<string, CelCheckType>> = {
  request: object('request', { method: STRING, path: STRING, pathAndQuery: STRING, host: STRING, scheme: STRING, headers: STRING_MAP }),
  source: object('source', { address: STRING, port: NUMBER }),
  jwt: DYN_MAP,
  apiKey: object('apiKey', { name: STRING, metadata: DYN_MAP }),
  basicAuth: object('basicAuth', { username: STRING }),
  mcp: object('mcp', { method: STRING, tool: MCP_ITEM, prompt: MCP_ITEM, resource: MCP_ITEM }),
  response: object('response', { code: INT, headers: STRING_MAP })
}

/** Thrown inside the walk; compileCel turns it into PORTICO_BAD_CEL. */
class TypeProblem extends Error {}

const NUMERIC = new Set(['int', 'uint', 'double', 'number'])
const ORDERED = new Set(['string', 'bytes', 'bool', 'timestamp', 'duration'])

function describe (t: CelCheckType): string {
  switch (t.kind) {
    case 'list': return 'list'
    case 'map': return 'map'
    case 'object': return t.name
    case 'number': return 'number'
    default: return t.kind
  }
}

/** `a string`, `an int`. */
function aType (t: CelCheckType): string {
  const name = describe(t)
  return `${/^[aeiou]/.test(name) ? 'an' : 'a'} ${name}`
}

function isDyn (t: CelCheckType): boolean {
  return t.kind === 'dyn'
}

function isNumeric (t: CelCheckType): boolean {
  return NUMERIC.has(t.kind)
}

/** Two numeric types that cannot meet in arithmetic (`1 + 1.0`): both known exactly and different. */
function numericClash (a: CelCheckType, b: CelCheckType): boolean {
  return a.kind !== 'number' && b.kind !== 'number' && a.kind !== b.kind
}

function noOverload (fn: string, args: CelCheckType[]): TypeProblem {
  return new TypeProblem(`found no matching overload for '${fn}' applied to (${args.map(describe).join(', ')})`)
}

/** The result of arithmetic `fn` over `a` and `b`, or a TypeProblem when no overload fits. */
function arithmetic (fn: string, a: CelCheckType, b: CelCheckType): CelCheckType {
  if (isDyn(a) || isDyn(b)) return DYN
  if (isNumeric(a) && isNumeric(b)) {
    if (numericClash(a, b)) throw noOverload(fn, [a, b])
    return a.kind === 'number' ? b : a
  }
  const pair = `${a.kind},${b.kind}`
  if (fn === '_+_') {
    if (a.kind === b.kind && (a.kind === 'string' || a.kind === 'bytes' || a.kind === 'list' || a.kind === 'duration')) return a
    if (pair === 'timestamp,duration' || pair === 'duration,timestamp') return { kind: 'timestamp' }
  }
  if (fn === '_-_') {
    if (pair === 'timestamp,timestamp' || pair === 'duration,duration') return { kind: 'duration' }
    if (pair === 'timestamp,duration') return { kind: 'timestamp' }
  }
  throw noOverload(fn, [a, b])
}

interface Scope {
  /** Comprehension variables (and the accumulator) in force: dyn or their element type. */
  bound: Map<string, CelCheckType>
  variables: Readonly<Record<string, CelCheckType>>
  known: ReadonlySet<string>
}

interface ExprNode {
  exprKind?: { case?: string, value?: any }
}

function check (node: ExprNode | undefined, scope: Scope): CelCheckType {
  const kind = node?.exprKind
  switch (kind?.case) {
    case 'constExpr': return constantType(kind.value?.constantKind?.case)
    case 'identExpr': {
      const name = String(kind.value?.name)
      return scope.bound.get(name) ?? (scope.known.has(name) ? scope.variables[name] ?? DYN : DYN)
    }
    case 'selectExpr': {
      const operand = check(kind.value.operand, scope)
      const field = String(kind.value.field)
      const type = select(operand, field)
      return kind.value.testOnly === true ? BOOL : type
    }
    case 'callExpr': return call(String(kind.value.function), kind.value.target, kind.value.args ?? [], scope)
    case 'listExpr': {
      const elems = (kind.value.elements ?? []).map((e: ExprNode) => check(e, scope))
      const first = elems[0]
      return { kind: 'list', elem: first !== undefined && elems.every((e: CelCheckType) => e.kind === first.kind && e.kind !== 'list' && e.kind !== 'map' && e.kind !== 'object') ? first : DYN }
    }
    case 'structExpr':
      for (const entry of kind.value.entries ?? []) {
        if (entry.keyKind?.case === 'mapKey') check(entry.keyKind.value, scope)
        check(entry.value, scope)
      }
      return kind.value.messageName === '' ? DYN_MAP : DYN
    case 'comprehensionExpr': return comprehension(kind.value, scope)
    default: return DYN
  }
}

function constantType (c: string | undefined): CelCheckType {
  switch (c) {
    case 'boolValue': return BOOL
    case 'int64Value': return INT
    case 'uint64Value': return { kind: 'uint' }
    case 'doubleValue': return { kind: 'double' }
    case 'stringValue': return STRING
    case 'bytesValue': return { kind: 'bytes' }
    case 'nullValue': return { kind: 'null' }
    default: return DYN
  }
}

function select (operand: CelCheckType, field: string): CelCheckType {
  switch (operand.kind) {
    case 'object': {
      const type = operand.fields[field]
      if (type === undefined) throw new TypeProblem(`${operand.name} has no field "${field}" (fields: ${Object.keys(operand.fields).join(', ')})`)
      return type
    }
    case 'map': return operand.value
    case 'dyn': return DYN
    default: throw new TypeProblem(`cannot select field "${field}" from ${aType(operand)}`)
  }
}

function expectBool (t: CelCheckType, fn: string, all: CelCheckType[]): void {
  if (t.kind !== 'bool' && !isDyn(t)) throw noOverload(fn, all)
}

function call (fn: string, targetNode: ExprNode | undefined, argNodes: ExprNode[], scope: Scope): CelCheckType {
  const target = targetNode !== undefined ? check(targetNode, scope) : undefined
  const args = argNodes.map(a => check(a, scope))
  const [a, b] = args as [CelCheckType, CelCheckType]
  switch (fn) {
    case '_&&_':
    case '_||_':
      for (const t of args) expectBool(t, fn, args)
      return BOOL
    case '!_':
    case '@not_strictly_false':
      expectBool(a, fn, args)
      return BOOL
    case '_?_:_': {
      expectBool(a, fn, args)
      const [, x, y] = args as [CelCheckType, CelCheckType, CelCheckType]
      return x.kind === y.kind && x.kind !== 'list' && x.kind !== 'map' && x.kind !== 'object' ? x : DYN
    }
    case '-_':
      if (!isDyn(a) && !isNumeric(a) && a.kind !== 'duration') throw noOverload(fn, args)
      return a
    case '_+_':
    case '_-_':
      return arithmetic(fn, a, b)
    case '_*_':
    case '_/_':
    case '_%_':
      if (isDyn(a) || isDyn(b)) return DYN
      if (!isNumeric(a) || !isNumeric(b) || numericClash(a, b) || (fn === '_%_' && (a.kind === 'double' || b.kind === 'double'))) throw noOverload(fn, args)
      return a.kind === 'number' ? b : a
    case '_<_':
    case '_<=_':
    case '_>_':
    case '_>=_':
      if (isDyn(a) || isDyn(b) || (isNumeric(a) && isNumeric(b)) || (a.kind === b.kind && ORDERED.has(a.kind))) return BOOL
      throw noOverload(fn, args)
    case '_==_':
    case '_!=_':
      if (comparable(a, b)) return BOOL
      throw new TypeProblem(`${fn === '_==_' ? '==' : '!='} compares ${aType(a)} with ${aType(b)}: ${fn === '_==_' ? 'never true' : 'always true'}`)
    case '_[_]':
      return index(a, b)
    case '@in':
      if (b.kind === 'list' || b.kind === 'map' || isDyn(b)) return BOOL
      throw noOverload('@in', args)
    case 'size': {
      const of = target ?? a
      if (of !== undefined && !isDyn(of) && !['string', 'bytes', 'list', 'map'].includes(of.kind)) throw noOverload('size', [of])
      return INT
    }
    case 'startsWith':
    case 'endsWith':
    case 'contains':
    case 'matches': {
      const all = target !== undefined ? [target, ...args] : args
      for (const t of all) if (t.kind !== 'string' && !isDyn(t)) throw noOverload(fn, all)
      return BOOL
    }
    case 'int': return INT
    case 'uint': return { kind: 'uint' }
    case 'double': return { kind: 'double' }
    case 'string': return STRING
    case 'bytes': return { kind: 'bytes' }
    case 'bool': return BOOL
    case 'timestamp': return { kind: 'timestamp' }
    case 'duration': return { kind: 'duration' }
    case 'type': return { kind: 'type' }
    default: return DYN
  }
}

/** Equality has an overload for two values of one kind; numbers compare across int, uint and double. */
function comparable (a: CelCheckType, b: CelCheckType): boolean {
  if (isDyn(a) || isDyn(b) || a.kind === 'null' || b.kind === 'null' || a.kind === 'type' || b.kind === 'type') return true
  if (isNumeric(a) && isNumeric(b)) return true
  const structured = (t: CelCheckType) => t.kind === 'map' || t.kind === 'object'
  if (structured(a) && structured(b)) return true
  return a.kind === b.kind
}

function index (operand: CelCheckType, key: CelCheckType): CelCheckType {
  switch (operand.kind) {
    case 'list':
      if (!isDyn(key) && !isNumeric(key)) throw noOverload('_[_]', [operand, key])
      return operand.elem
    case 'map':
      // The maps Portico passes have string keys: another key is never found.
      if (!isDyn(key) && key.kind !== 'string') throw noOverload('_[_]', [operand, key])
      return operand.value
    case 'object':
      if (!isDyn(key) && key.kind !== 'string') throw noOverload('_[_]', [operand, key])
      return DYN
    case 'dyn': return DYN
    default: throw noOverload('_[_]', [operand, key])
  }
}

function comprehension (c: any, scope: Scope): CelCheckType {
  const range = check(c.iterRange, scope)
  let elem: CelCheckType = DYN
  if (range.kind === 'list') elem = range.elem
  else if (range.kind === 'map') elem = STRING
  else if (!isDyn(range) && range.kind !== 'object') throw new TypeProblem(`cannot iterate over ${aType(range)}`)
  const bound = new Map(scope.bound)
  if (typeof c.iterVar === 'string' && c.iterVar !== '') bound.set(c.iterVar, elem)
  if (typeof c.iterVar2 === 'string' && c.iterVar2 !== '') bound.set(c.iterVar2, DYN)
  const accuInit = check(c.accuInit, scope)
  // The accumulator is dyn: a macro's step (`@result && pred`, `@result + [x]`) checks what it adds.
  bound.set(String(c.accuVar), DYN)
  const inner: Scope = { ...scope, bound }
  check(c.loopCondition, inner)
  check(c.loopStep, inner)
  const result = check(c.result, inner)
  // all() and exists() start from a bool and end with it.
  return accuInit.kind === 'bool' && c.result?.exprKind?.case === 'identExpr' ? BOOL : result
}

/**
 * Why the parsed expression `ast` can never evaluate over `variables` (each typed by
 * CEL_VARIABLE_TYPES, else dyn), or null. With `expectBool`, a result known not to be a bool
 * is a problem too (a rule or a filter that can never be true).
 */
export function celTypeProblem (ast: unknown, variables: readonly string[], expectBool = false): string | null {
  const scope: Scope = { bound: new Map(), variables: CEL_VARIABLE_TYPES, known: new Set(variables) }
  try {
    const type = check((ast as { expr?: ExprNode }).expr, scope)
    if (expectBool && type.kind !== 'bool' && !isDyn(type)) return `it yields ${aType(type)}, not a bool`
    return null
  } catch (err) {
    if (err instanceof TypeProblem) return err.message
    throw err
  }
}
