// Reads and edits data.shards of the shard ConfigMap (docs/shards.md).
// The page never validates an ID itself: the chart's admission policy and
// the daemon decide, and the page shows their words. It only keeps the
// form the operator chose (plain IDs or a YAML list) when it edits.
import jsyaml from 'js-yaml';

export const SHARDS_KEY = 'shards';
export const FORCE_DELETE_ANNOTATION = 'shardkeeper.io/force-delete';

export type ShardsForm = 'ids' | 'yaml' | 'auto' | 'missing';

export interface ShardList {
  form: ShardsForm;
  ids: string[];
  /** Why the value cannot be read; the daemon's status says more. */
  error: string;
}

function isYAMLForm(trimmed: string): boolean {
  return trimmed.startsWith('-') || trimmed.startsWith('[');
}

function splitIDs(value: string): string[] {
  return value.split(/[,\s]+/).filter((s) => s !== '');
}

function loadList(trimmed: string): unknown[] {
  const raw = jsyaml.load(trimmed, { schema: jsyaml.CORE_SCHEMA });

  if (!Array.isArray(raw)) {
    throw new Error('not a YAML list');
  }

  return raw;
}

function isMap(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

// The daemon's YAML reader resolves YAML 1.1's merge key ("<<: *base"); the
// core schema leaves it a key like any other. A key of the item itself
// wins over a merged one, and an earlier merged map over a later one.
function resolveMerge(item: Record<string, unknown>): Record<string, unknown> {
  const from = item['<<'];

  if (from === undefined) {
    return item;
  }
  const maps = (Array.isArray(from) ? from : [from]).filter(isMap).map(resolveMerge);
  const out: Record<string, unknown> = Object.assign({}, ...maps.reverse(), item);

  delete out['<<'];

  return out;
}

function itemID(item: unknown): string {
  if (typeof item === 'string') {
    return item;
  }
  if (isMap(item)) {
    const id = resolveMerge(item).id;

    return typeof id === 'string' ? id : '';
  }

  return '';
}

/** The shards that data.shards lists, in the two forms the daemon reads. */
export function parseShards(data: Record<string, string> | null | undefined): ShardList {
  const value = data?.[SHARDS_KEY];

  if (value === undefined) {
    return { form: 'missing', ids: [], error: '' };
  }
  const trimmed = value.trim();

  if (trimmed === 'auto') {
    return { form: 'auto', ids: [], error: '' };
  }
  if (!isYAMLForm(trimmed)) {
    return { form: 'ids', ids: splitIDs(trimmed), error: '' };
  }
  try {
    return { form: 'yaml', ids: loadList(trimmed).map(itemID), error: '' };
  } catch (e) {
    return { form: 'yaml', ids: [], error: (e as Error).message };
  }
}

function editList(value: string, edit: (items: unknown[]) => unknown[]): string {
  const trimmed = value.trim();

  if (!isYAMLForm(trimmed)) {
    return edit(splitIDs(trimmed)).join(',');
  }
  const items = edit(loadList(trimmed));

  if (items.length === 0) {
    return '[]';
  }

  return jsyaml.dump(items, { lineWidth: -1 });
}

/**
 * data.shards with id appended, in the value's own form. An empty or
 * missing value becomes the plain form.
 */
export function withShardAdded(value: string | undefined, id: string): string {
  if (value === undefined || value.trim() === '' || value.trim() === '[]') {
    return id;
  }
  if (value.trim() === 'auto') {
    throw new Error('the shard list is "auto": placement chooses the shards, so none is added by hand');
  }

  return editList(value, (items) => [...items, id]);
}

/**
 * data.shards without id. Removing the last shard writes "[]", the
 * explicit empty list the daemon asks for (an empty value is refused).
 */
export function withShardRemoved(value: string | undefined, id: string): string {
  if (value === undefined || value.trim() === 'auto') {
    throw new Error('the shard list does not name shards to remove');
  }
  const out = editList(value, (items) => items.filter((item) => itemID(item) !== id));

  return out === '' ? '[]' : out;
}

/** The force-delete annotation with id added (kept as the daemon reads it: IDs separated by commas). */
export function withForce(annotation: string | undefined, id: string): string {
  const ids = (annotation || '').split(/[,\s]+/).filter((s) => s !== '');

  if (!ids.includes(id) && !ids.includes('*')) {
    ids.push(id);
  }

  return ids.join(',');
}
