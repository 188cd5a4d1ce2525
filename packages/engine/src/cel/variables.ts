/**
 * The variables CEL expressions see, by where they are evaluated: in a module of their own so
 * that code naming them (the access log's settings) does not load the CEL compiler
 * (expression.ts, check.ts), which loads with the first config that has an expression.
 */

export const CEL_VARIABLES = ['request', 'source', 'jwt', 'apiKey', 'basicAuth', 'mcp'] as const

/** Variables of expressions evaluated on the response: the request's plus `response`. */
export const RESPONSE_CEL_VARIABLES = [...CEL_VARIABLES, 'response'] as const
