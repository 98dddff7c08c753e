import {
  parseShards, withForce, withShardAdded, withShardRemoved
} from '../utils/shards';
import { refusalSentence, warningTexts } from '../utils/api';
import { shardOf, UNSHARDED } from '../utils/column';
import admission from '../fixtures/admission.json';

describe('the shard list', () => {
  it('reads both forms, and auto', () => {
    expect(parseShards({ shards: 'shard0, shard1\nshard2' })).toEqual({ form: 'ids', ids: ['shard0', 'shard1', 'shard2'], error: '' });
    expect(parseShards({ shards: '- shard0\n- id: gpu\n  replicas: 2\n' }).ids).toEqual(['shard0', 'gpu']);
    expect(parseShards({ shards: 'auto' }).form).toBe('auto');
    expect(parseShards({}).form).toBe('missing');
    expect(parseShards({ shards: '- [' }).error).not.toBe('');
  });

  it('adds and removes in the form the operator chose', () => {
    expect(withShardAdded('shard0,shard1', 'shard2')).toBe('shard0,shard1,shard2');
    expect(withShardAdded('[]', 'shard0')).toBe('shard0');
    expect(withShardRemoved('shard0 shard1', 'shard1')).toBe('shard0');
    const yaml = '- shard0\n- id: gpu\n  nodeSelector: {pool: gpu}\n';
    const added = withShardAdded(yaml, 'shard2');

    expect(parseShards({ shards: added }).ids).toEqual(['shard0', 'gpu', 'shard2']);
    expect(added).toContain('pool: gpu');
    const removed = withShardRemoved(yaml, 'shard0');

    expect(parseShards({ shards: removed }).ids).toEqual(['gpu']);
    expect(removed).toContain('pool: gpu');
  });

  it('writes the explicit empty list when the last shard goes', () => {
    expect(withShardRemoved('shard0', 'shard0')).toBe('[]');
    expect(withShardRemoved('- shard0\n', 'shard0')).toBe('[]');
  });

  it('adds nothing to auto', () => {
    expect(() => withShardAdded('auto', 'x')).toThrow('auto');
  });

  it('adds an ID to the force annotation once', () => {
    expect(withForce(undefined, 'shard1')).toBe('shard1');
    expect(withForce('shard0', 'shard1')).toBe('shard0,shard1');
    expect(withForce('shard1', 'shard1')).toBe('shard1');
    expect(withForce('*', 'shard1')).toBe('*');
  });
});

describe('the API server\'s words', () => {
  it('keeps the sentence of a refusal, not the policy\'s name', () => {
    expect(refusalSentence(admission.refusal)).toBe('shards[1]: shard ID "Shard_1" is invalid: use lower-case letters, digits and \'-\', starting and ending with a letter or digit');
    expect(refusalSentence('plain')).toBe('plain');
  });

  it('splits a Warning header into its texts', () => {
    expect(warningTexts(`299 - "a, with a comma", 299 - "b \\"quoted\\""`)).toEqual(['a, with a comma', 'b "quoted"']);
    expect(warningTexts(undefined)).toEqual([]);
  });
});

describe('the Shard column', () => {
  it('shows the shard label, or that the object is unsharded', () => {
    expect(shardOf({ metadata: { labels: { 'fleet.cattle.io/shard-ref': 'shard1' } } })).toBe('shard1');
    expect(shardOf({ metadata: { labels: {} } })).toBe(UNSHARDED);
  });
});
