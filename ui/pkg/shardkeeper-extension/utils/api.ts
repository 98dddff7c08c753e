// Everything the page reads and writes goes through Rancher's store
// (management/request), as the logged-in user: Rancher's RBAC and the
// API server's admission policies apply to every request, and nothing here
// talks to the cluster another way.
import { SHARDS_KEY, FORCE_DELETE_ANNOTATION, withForce } from './shards';
import { ConfigMapLike } from './status';

/** The part of Vuex's store the page uses: mocked in the tests. */
export interface StoreLike {
  dispatch(action: string, payload?: unknown): Promise<any>;
}

export const DEFAULT_NAMESPACE = 'cattle-fleet-system';
export const DEFAULT_NAME = 'shardkeeper';

/** The label that puts a Fleet GitRepo or HelmOp on a shard. */
export const FLEET_SHARD_LABEL = 'fleet.cattle.io/shard-ref';

export interface ShardConfigMap extends ConfigMapLike {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; resourceVersion?: string; annotations?: Record<string, string> | null; [k: string]: unknown };
  data?: Record<string, string> | null;
}

/** An API error or refusal, as Rancher's store hands it back. */
interface StoreError {
  message?: string;
  _status?: number;
  status?: number;
  code?: string;
  data?: { message?: string };
}

function path(ns: string, name?: string): string {
  return `/v1/configmaps/${ encodeURIComponent(ns) }${ name ? `/${ encodeURIComponent(name) }` : '' }`;
}

function statusOf(e: unknown): number {
  const err = e as StoreError;

  return err?._status || err?.status || 0;
}

/** The text of an error from the store: Steve puts the API server's sentence in message. */
export function errorText(e: unknown): string {
  const err = e as StoreError;

  if (typeof e === 'string') {
    return e;
  }

  return err?.message || err?.data?.message || err?.code || String(e);
}

/**
 * The sentence of an admission policy's refusal, without the API server's
 * preamble ("... denied request: "), which names the policy, not the problem.
 */
export function refusalSentence(message: string): string {
  const i = message.indexOf('denied request: ');

  return i >= 0 ? message.slice(i + 'denied request: '.length) : message;
}

/**
 * The texts of a Warning header: each warning is `299 - "text"`, and
 * several are joined by commas, which the texts may hold too.
 */
export function warningTexts(header: string | string[] | undefined): string[] {
  const all = Array.isArray(header) ? header.join(', ') : header || '';
  const out: string[] = [];
  const re = /\d{3} \S+ "((?:[^"\\]|\\.)*)"/g;
  let m: RegExpExecArray | null;

  while ((m = re.exec(all)) !== null) {
    out.push(m[1].replace(/\\(.)/g, '$1'));
  }
  if (out.length === 0 && all.trim() !== '') {
    out.push(all.trim());
  }

  return out;
}

async function get(store: StoreLike, url: string): Promise<any | null> {
  try {
    return await store.dispatch('management/request', { url, method: 'get' });
  } catch (e) {
    if (statusOf(e) === 404) {
      return null;
    }
    throw e;
  }
}

export interface Loaded {
  shardConfigMap: ShardConfigMap | null;
  statusConfigMap: ConfigMapLike | null;
  events: any[];
}

/** Reads the shard ConfigMap, its status and its Events. A missing one is null. */
export async function load(store: StoreLike, ns: string, name: string): Promise<Loaded> {
  const [shardConfigMap, statusConfigMap, events] = await Promise.all([
    get(store, path(ns, name)),
    get(store, path(ns, `${ name }-status`)),
    // Steve lists one namespace's Events; the page keeps the ConfigMap's.
    get(store, `/v1/events/${ encodeURIComponent(ns) }`).catch(() => null),
  ]);

  return {
    shardConfigMap, statusConfigMap, events: events?.data || []
  };
}

/** A few objects on a shard, as "kind namespace/name". */
export async function objectsOnShard(store: StoreLike, id: string, limit = 5): Promise<string[]> {
  const out: string[] = [];

  for (const [kind, type] of [['gitrepos', 'fleet.cattle.io.gitrepos'], ['helmops', 'fleet.cattle.io.helmops']]) {
    const sel = encodeURIComponent(`${ FLEET_SHARD_LABEL }=${ id }`);
    let res: any;

    try {
      res = await get(store, `/v1/${ type }?labelSelector=${ sel }&limit=${ limit }`);
    } catch {
      // A kind the user may not list: the status's counts still say how many.
      continue;
    }
    for (const o of res?.data || []) {
      out.push(`${ kind } ${ o.metadata?.namespace }/${ o.metadata?.name }`);
    }
  }

  return out.slice(0, limit);
}

export interface SaveResult {
  /** The API server's warnings (the removal policy's among them). */
  warnings: string[];
  saved: ShardConfigMap;
}

/**
 * Writes data.shards (and, when force names a shard, the force-delete
 * annotation) in one update. The update carries the resourceVersion that
 * was read, so a concurrent edit fails instead of being overwritten. A
 * refusal rejects with the API server's sentence, and nothing is stored.
 */
export async function saveShards(store: StoreLike, cm: ShardConfigMap, shards: string, force?: string): Promise<SaveResult> {
  const body: ShardConfigMap = {
    ...cm,
    apiVersion: 'v1',
    kind:       'ConfigMap',
    metadata:   { ...cm.metadata, annotations: { ...(cm.metadata.annotations || {}) } },
    data:       { ...(cm.data || {}), [SHARDS_KEY]: shards },
  };

  if (force) {
    const annotations = body.metadata.annotations as Record<string, string>;

    annotations[FORCE_DELETE_ANNOTATION] = withForce(annotations[FORCE_DELETE_ANNOTATION], force);
  }
  let res: any;

  try {
    res = await store.dispatch('management/request', {
      url: path(cm.metadata.namespace, cm.metadata.name), method: 'put', data: body
    });
  } catch (e) {
    throw new Error(refusalSentence(errorText(e)));
  }
  const headers = res?._headers || {};

  return { warnings: warningTexts(headers.warning || headers.Warning), saved: res };
}
