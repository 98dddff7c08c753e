import { readFileSync } from 'fs';
import { join } from 'path';
import { parseShards } from '../utils/shards';

// The corpus that the daemon's parser and the chart's admission policies are
// tested on (pkg/testfixture/corpus.go documents its fields): the page must
// read every list the daemon accepts as the daemon does, in the same form.
// A list the daemon refuses is the daemon's to explain (the page shows its
// status), so only the accepted ones are held here.
interface ConfigCase {
  name: string;
  shards?: string;
  repeat?: number;
  suffix?: string;
  error?: string;
  ids?: string[];
  auto?: boolean;
}

const corpus: { configs: ConfigCase[] } = JSON.parse(readFileSync(join(__dirname, '../../../../pkg/shardconfig/testdata/corpus.json'), 'utf8'));

function data(c: ConfigCase): Record<string, string> {
  if (c.shards === undefined) {
    return {};
  }

  return { shards: c.shards.repeat(c.repeat || 1) + (c.suffix || '') };
}

describe('the shard list, on the daemon\'s corpus', () => {
  // In Rancher the extension's js-yaml is the dashboard's (Shell's build
  // makes it an external, __jsyaml), so the corpus is read with that
  // version here too, not with one another package brought in.
  it('is read with Shell\'s js-yaml', () => {
    const shell = JSON.parse(readFileSync(require.resolve('@rancher/shell/package.json'), 'utf8'));
    const ours = JSON.parse(readFileSync(require.resolve('js-yaml/package.json'), 'utf8'));

    expect(ours.version).toBe(shell.dependencies['js-yaml']);
  });

  it('has cases', () => {
    expect(corpus.configs.length).toBeGreaterThan(0);
  });

  it.each(corpus.configs.filter((c) => !c.error).map((c) => [c.name, c]))('reads %s as the daemon does', (_, c) => {
    const got = parseShards(data(c));

    expect(got.error).toBe('');
    if (c.auto) {
      expect(got.form).toBe('auto');

      return;
    }
    const trimmed = data(c).shards.trim();

    expect(got.form).toBe(trimmed.startsWith('-') || trimmed.startsWith('[') ? 'yaml' : 'ids');
    expect(got.ids).toEqual(c.ids);
  });

  it.each(corpus.configs.filter((c) => c.shards === undefined).map((c) => [c.name, c]))('reads %s as no list', (_, c) => {
    expect(parseShards(data(c)).form).toBe('missing');
  });
});
