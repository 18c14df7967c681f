// Measuring knobs read from the environment.

/**
 * The positive number an environment variable holds (fractions too), or undefined when it is unset,
 * empty, zero, negative or not a number: such a knob then keeps its default.
 * @example positiveEnv('1.5') // 1.5; positiveEnv('0') // undefined; positiveEnv(undefined) // undefined
 */
export function positiveEnv(value: string | undefined): number | undefined {
  const n = Number(value);
  return value !== undefined && value.trim() !== '' && Number.isFinite(n) && n > 0 ? n : undefined;
}
