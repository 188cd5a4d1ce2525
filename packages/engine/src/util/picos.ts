/**
 * Amounts of a currency as exact integers of 10^-12 units ("picos"): what an LLM call costs
 * (llm/cost.ts) and what a cost budget holds (policy/cost-bucket.ts).
 */

/** A plain decimal of an integer of 10^-12 units (`325000000` → `0.000325`; negative for a debt). */
export function formatPicos (picos: bigint): string {
  const negative = picos < 0n
  const digits = (negative ? -picos : picos).toString().padStart(13, '0')
  const whole = digits.slice(0, -12)
  const fraction = digits.slice(-12).replace(/0+$/, '')
  return `${negative ? '-' : ''}${whole}${fraction === '' ? '' : `.${fraction}`}`
}
