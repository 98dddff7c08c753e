// js-yaml is Rancher's (the host page provides it; the build does not
// bundle it), and ships no types: these are the calls the extension makes.
declare module 'js-yaml' {
  export interface Schema {}
  export const CORE_SCHEMA: Schema;
  export function load(text: string, opts?: { schema?: Schema }): unknown;
  export function dump(value: unknown, opts?: { lineWidth?: number }): string;
  const jsyaml: { load: typeof load; dump: typeof dump; CORE_SCHEMA: Schema };
  export default jsyaml;
}
