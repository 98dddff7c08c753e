import statusFixture from '../fixtures/status.json';
import {
  eventsFor, mappedText, mappedTotal, parseStatus, warningSentences
} from '../utils/status';

// The fixture is the status ConfigMap a real daemon wrote in the e2e test
// TestUIFixture, which fails when the daemon's output changes shape.
describe('parseStatus on the daemon\'s status', () => {
  const st = parseStatus(statusFixture);

  it('reads one row per shard, with its state, readiness and counts', () => {
    expect(st.problems).toEqual([]);
    expect(st.error).toBe('');
    expect(st.rows.map((r) => `${ r.id }=${ r.state }`)).toEqual(['gpu=Active', 'shard0=Active', 'shard1=Blocked']);
    const shard1 = st.rows.find((r) => r.id === 'shard1')!;

    expect(shard1.mapped).toEqual({ gitrepos: 1, helmops: 1, helmreleases: 1 });
    expect(mappedText(shard1.mapped)).toBe('1 gitrepos, 1 helmops, 1 helmreleases');
    expect(mappedTotal(shard1.mapped)).toBe(3);
    expect(shard1.desired).toBeGreaterThan(0);
    expect(shard1.ready).toBeLessThanOrEqual(shard1.desired);
    expect(shard1.message).toContain('shardkeeper.io/force-delete=shard1');
  });

  it('agrees with the mapped key, which the admission policy reads', () => {
    const lines = statusFixture.data.mapped.split('\n');

    expect(lines).toEqual(st.rows.filter((r) => mappedTotal(r.mapped) > 0).map((r) => `${ r.id }: ${ mappedText(r.mapped) }`));
  });

  it('reads the git Job placement of a shard', () => {
    expect(st.rows.find((r) => r.id === 'gpu')!.jobPlacement).toContain('dedicated=gpu:NoSchedule');
    expect(st.rows.find((r) => r.id === 'shard0')!.jobPlacement).toBe('');
  });

  it('reads the warnings and says them as sentences', () => {
    expect(st.warnings.unknownShards).toEqual([{ id: 'shard9', count: 1, objects: [`gitrepos ${ statusFixture.metadata.namespace }/typo-repo`] }]);
    expect(st.warnings.crossShard?.count).toBe(1);
    const sentences = warningSentences(st.warnings);

    expect(sentences).toHaveLength(2);
    expect(sentences[0]).toContain('"shard9", which is not configured');
    expect(sentences[1]).toContain('on another shard than their own');
  });
});

describe('parseStatus on what is not a good status', () => {
  it('says that there is no status', () => {
    expect(parseStatus(null).problems[0]).toContain('no status ConfigMap');
  });

  it('keeps the rows when the warnings cannot be read', () => {
    const st = parseStatus({ data: { status: '- id: a\n  state: Pending\n', warnings: 'unknownShards: [' } });

    expect(st.rows.map((r) => r.state)).toEqual(['Pending']);
    expect(st.problems).toHaveLength(1);
    expect(st.problems[0]).toContain('"warnings" key is not YAML');
  });

  it('shows a state it does not know as it is, and the error of a rejected list', () => {
    const st = parseStatus({ data: { status: '- id: a\n  state: Hibernating\n', error: 'shards[0]: bad' } });

    expect(st.rows[0].state).toBe('Hibernating');
    expect(st.error).toBe('shards[0]: bad');
  });

  it('reads a status that is not a list as a problem', () => {
    expect(parseStatus({ data: { status: 'id: a' } }).problems[0]).toContain('not a list');
  });
});

describe('eventsFor', () => {
  it('keeps the shard ConfigMap\'s Events, newest first', () => {
    const ev = (name: string, reason: string, last: string) => ({
      reason, message: reason, type: 'event', _type: 'Warning', lastTimestamp: last, involvedObject: { kind: 'ConfigMap', name, namespace: 'ns' }
    });
    const rows = eventsFor([ev('shardkeeper', 'A', '2026-01-01T00:00:00Z'), ev('other', 'B', '2026-01-03T00:00:00Z'), ev('shardkeeper', 'C', '2026-01-02T00:00:00Z')], 'ns', 'shardkeeper');

    expect(rows.map((r) => r.reason)).toEqual(['C', 'A']);
    expect(rows.map((r) => r.type)).toEqual(['Warning', 'Warning']);
  });
});
