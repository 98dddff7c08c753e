// Reads the daemon's status ConfigMap (<name>-status). Its format is the
// contract between the daemon and this page (docs/operations.md#status):
// the daemon alone decides states; the page only shows what it wrote.
import jsyaml from 'js-yaml';

/** One shard's line in data.status. */
export interface ShardRow {
  id: string;
  state: string;
  ready: number;
  desired: number;
  /** Objects mapped to the shard, per kind (gitrepos, helmops, ...). */
  mapped: Record<string, number>;
  message: string;
  jobPlacement: string;
}

export interface UnknownShard {
  id: string;
  count: number;
  objects: string[];
}

export interface NotShardAware {
  source: string;
  needs: string;
}

/** data.warnings, all optional. */
export interface Warnings {
  unknownShards: UnknownShard[];
  moreUnknownShards: number;
  moreUnknownObjects: number;
  notShardAware: NotShardAware[];
  failoverWithheld: string;
  renderErrors: string[];
  crossShard: { count: number; objects: string[] } | null;
}

export interface ParsedStatus {
  rows: ShardRow[];
  warnings: Warnings;
  /** data.error: why the shard ConfigMap was rejected, while it is. */
  error: string;
  /** Parts of the status that could not be read, said as sentences. */
  problems: string[];
}

export interface ConfigMapLike {
  metadata?: { name?: string; namespace?: string; annotations?: Record<string, string> | null; resourceVersion?: string };
  data?: Record<string, string> | null;
}

/** States as the daemon names them; any other string is shown as it is. */
export const KNOWN_STATES = [
  'Active', 'Pending', 'Blocked', 'Waiting', 'Conflict', 'Draining', 'Drained', 'FailedOver', 'WriteFailing',
];

// The YAML is written by sigs.k8s.io/yaml; the core schema reads it as
// the daemon meant it, without the extra types of js-yaml's default.
function loadYAML(text: string): unknown {
  return jsyaml.load(text, { schema: jsyaml.CORE_SCHEMA });
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((s) => typeof s === 'string') : [];
}

function record(v: unknown): Record<string, unknown> {
  return v && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : {};
}

function counts(v: unknown): Record<string, number> {
  const out: Record<string, number> = {};

  for (const [kind, n] of Object.entries(record(v))) {
    if (typeof n === 'number') {
      out[kind] = n;
    }
  }

  return out;
}

export function emptyWarnings(): Warnings {
  return {
    unknownShards:      [],
    moreUnknownShards:  0,
    moreUnknownObjects: 0,
    notShardAware:      [],
    failoverWithheld:   '',
    renderErrors:       [],
    crossShard:         null,
  };
}

function parseRows(text: string | undefined, problems: string[]): ShardRow[] {
  if (text === undefined) {
    problems.push('the status has no "status" key: the daemon has not written it yet');

    return [];
  }
  let raw: unknown;

  try {
    raw = loadYAML(text);
  } catch (e) {
    problems.push(`the status's "status" key is not YAML: ${ (e as Error).message }`);

    return [];
  }
  if (!Array.isArray(raw)) {
    problems.push('the status\'s "status" key is not a list');

    return [];
  }

  return raw.map((item) => {
    const r = record(item);

    return {
      id:           str(r.id),
      state:        str(r.state) || 'Unknown',
      ready:        num(r.ready),
      desired:      num(r.desired),
      mapped:       counts(r.mapped),
      message:      str(r.message),
      jobPlacement: str(r.jobPlacement),
    };
  });
}

function parseWarnings(text: string | undefined, problems: string[]): Warnings {
  const w = emptyWarnings();

  if (!text) {
    return w;
  }
  let raw: Record<string, unknown>;

  try {
    raw = record(loadYAML(text));
  } catch (e) {
    problems.push(`the status's "warnings" key is not YAML: ${ (e as Error).message }`);

    return w;
  }
  w.unknownShards = (Array.isArray(raw.unknownShards) ? raw.unknownShards : []).map((u) => {
    const r = record(u);

    return {
      id: str(r.id), count: num(r.count), objects: strings(r.objects)
    };
  });
  w.moreUnknownShards = num(raw.moreUnknownShards);
  w.moreUnknownObjects = num(raw.moreUnknownObjects);
  w.notShardAware = (Array.isArray(raw.notShardAware) ? raw.notShardAware : []).map((n) => {
    const r = record(n);

    return { source: str(r.source), needs: str(r.needs) };
  });
  w.failoverWithheld = str(raw.failoverWithheld);
  w.renderErrors = strings(raw.renderErrors);
  if (raw.crossShard) {
    const c = record(raw.crossShard);

    w.crossShard = { count: num(c.count), objects: strings(c.objects) };
  }

  return w;
}

/**
 * Parses a status ConfigMap. A part that cannot be read is left empty and
 * said in problems, as the daemon's own reader does: the status is only a
 * report, rewritten in full.
 */
export function parseStatus(cm: ConfigMapLike | null | undefined): ParsedStatus {
  const problems: string[] = [];

  if (!cm) {
    return {
      rows: [], warnings: emptyWarnings(), error: '', problems: ['there is no status ConfigMap: is shardkeeper running?']
    };
  }
  const data = cm.data || {};

  return {
    rows:     parseRows(data.status, problems),
    warnings: parseWarnings(data.warnings, problems),
    error:    str(data.error),
    problems,
  };
}

/** "2 gitrepos, 1 helmops", the kinds in name order, as the daemon writes them. */
export function mappedText(mapped: Record<string, number>): string {
  return Object.keys(mapped).sort().map((k) => `${ mapped[k] } ${ k }`).join(', ');
}

export function mappedTotal(mapped: Record<string, number>): number {
  return Object.values(mapped).reduce((a, b) => a + b, 0);
}

/** The warnings as sentences, one per finding, for the page's banners. */
export function warningSentences(w: Warnings): string[] {
  const out: string[] = [];

  for (const u of w.unknownShards) {
    out.push(`${ u.count } object(s) carry shard ID "${ u.id }", which is not configured, so nothing reconciles them${ u.objects.length ? ` (${ u.objects.join(', ') })` : '' }.`);
  }
  if (w.moreUnknownShards > 0) {
    out.push(`${ w.moreUnknownShards } more shard IDs that are not configured, on ${ w.moreUnknownObjects } object(s).`);
  }
  for (const n of w.notShardAware) {
    out.push(`Source ${ n.source } is not shard-aware: it must be started with ${ n.needs }.`);
  }
  if (w.failoverWithheld) {
    out.push(w.failoverWithheld);
  }
  for (const e of w.renderErrors) {
    out.push(`A shard Deployment could not be rendered: ${ e }`);
  }
  if (w.crossShard) {
    out.push(`${ w.crossShard.count } object(s) have part of their work on another shard than their own: ${ w.crossShard.objects.join(' | ') }`);
  }

  return out;
}

/** A Kubernetes Event of the shard ConfigMap, as the page lists it. */
export interface EventRow {
  type: string;
  reason: string;
  message: string;
  count: number;
  last: string;
}

interface EventLike {
  /** Rancher's Steve gives every object type = its schema ("event") and moves the Event's own type here. */
  _type?: string;
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  lastTimestamp?: string | null;
  eventTime?: string | null;
  metadata?: { creationTimestamp?: string };
  involvedObject?: { kind?: string; name?: string; namespace?: string };
}

/** The Events of one ConfigMap, newest first. */
export function eventsFor(events: EventLike[], namespace: string, name: string, limit = 20): EventRow[] {
  return events
    .filter((e) => e.involvedObject?.kind === 'ConfigMap' && e.involvedObject?.name === name &&
      (!e.involvedObject?.namespace || e.involvedObject.namespace === namespace))
    .map((e) => ({
      type:    e._type || e.type || 'Normal',
      reason:  e.reason || '',
      message: e.message || '',
      count:   e.count || 1,
      last:    e.lastTimestamp || e.eventTime || e.metadata?.creationTimestamp || '',
    }))
    .sort((a, b) => (a.last < b.last ? 1 : a.last > b.last ? -1 : 0))
    .slice(0, limit);
}
