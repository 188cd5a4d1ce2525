/**
 * A request's or response's headers as policies, traces and the backend call see them: lower
 * case names, a string or (for repeated headers) an array per name, as node:http gives them.
 */
export type HeaderMap = Record<string, string | string[] | undefined>
