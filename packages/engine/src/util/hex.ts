/** The value of one hexadecimal digit's character code, or -1 (percent-escapes, chunk sizes). */
export function hexValue (code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30
  if (code >= 0x41 && code <= 0x46) return code - 0x37
  if (code >= 0x61 && code <= 0x66) return code - 0x57
  return -1
}
