/**
 * @jest-environment node
 */
// The built extension, as the chart ships it: Rancher's fetch of the files
// from the UIPlugin's endpoint, and Rancher's loader running the bundle in
// a page. Needs the staged chart (make ui-chart), bin/helm and busybox.
const fs = require('fs');
const os = require('os');
const net = require('net');
const { spawn } = require('child_process');
const path = require('path');
const jsyaml = require('js-yaml');
const { JSDOM, VirtualConsole } = require('jsdom');
const { renderChart, start } = require('./server');

const UI = path.resolve(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(UI, 'pkg', 'shardkeeper-extension', 'package.json'), 'utf8'));
const chartYAML = jsyaml.load(fs.readFileSync(path.join(UI, '..', 'charts', 'shardkeeper-extension', 'Chart.yaml'), 'utf8'));

let rendered;
let server;

beforeAll(async() => {
  rendered = renderChart();
  server = await start(rendered.files, rendered.uiplugin.spec.plugin.name, rendered.uiplugin.spec.plugin.version);
});

afterAll(() => server && server.close());

function get(url) {
  return new Promise((resolve, reject) => {
    require('http').get(url, (res) => {
      const chunks = [];

      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }));
    }).on('error', reject);
  });
}

function freePort() {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address();

      srv.close(() => resolve(port));
    });
  });
}

describe('the extension chart', () => {
  it('names the package, and carries the package\'s version as the chart\'s', () => {
    const { spec, metadata } = rendered.uiplugin;

    expect(metadata.namespace).toBe('cattle-ui-plugin-system');
    expect(spec.plugin.name).toBe(pkg.name);
    expect(chartYAML.name).toBe(pkg.name);
    expect(chartYAML.version).toBe(pkg.version);
    expect(spec.plugin.version).toBe(pkg.version);
    // Without it Rancher 2.10 and later refuse the extension.
    expect(spec.plugin.metadata['catalog.cattle.io/ui-extensions-version']).toBe('>= 3.0.0 < 4.0.0');
    expect(chartYAML.annotations['catalog.cattle.io/ui-component']).toBe('plugins');
    // Run in a real Rancher on every CI run (make test-rancher): no longer experimental.
    expect(chartYAML.annotations['catalog.cattle.io/experimental']).toBeUndefined();
    expect(spec.plugin.metadata['catalog.cattle.io/experimental']).toBeUndefined();
    expect(spec.plugin.endpoint).toBe('http://shardkeeper-extension.cattle-ui-plugin-system.svc:8080');
  });

  it('points at another endpoint only when told, and then runs no server', () => {
    const other = renderChart(undefined, ['--set', 'server.enabled=false', '--set', 'plugin.endpoint=https://files.example/x']);

    expect(other.uiplugin.spec.plugin.endpoint).toBe('https://files.example/x');
    expect(other.objs.map((o) => o.kind)).toEqual(['UIPlugin']);
  });
});

// What Rancher does with a UIPlugin's endpoint: fetch plugin/package.json
// (its version must be the UIPlugin's), files.txt, and every file it lists.
async function rancherFetch(endpoint) {
  const pj = await get(`${ endpoint }/plugin/package.json`);

  expect(pj.status).toBe(200);
  expect(JSON.parse(pj.body.toString()).version).toBe(rendered.uiplugin.spec.plugin.version);

  const list = await get(`${ endpoint }/files.txt`);

  expect(list.status).toBe(200);
  const entries = list.body.toString().split('\n').filter((l) => l !== '');

  expect(entries).toContain('plugin/package.json');
  expect(entries).toContain(`plugin/${ pkg.name }-${ pkg.version }.umd.min.js`);
  for (const e of entries) {
    // Rancher joins each entry to the endpoint and to its cache folder.
    expect(e).not.toMatch(/^\/|(^|\/)\.\.(\/|$)|^[a-z]+:/);
    const got = await get(`${ endpoint }/${ e }`);

    expect({ e, status: got.status }).toEqual({ e, status: 200 });
    expect(got.body.equals(rendered.files.get(e))).toBe(true);
  }
  // Every file the chart serves is listed: nothing is left out of Rancher's cache.
  expect([...rendered.files.keys()].filter((f) => f !== 'files.txt').sort()).toEqual([...entries].sort());
}

describe('Rancher\'s fetch from the endpoint', () => {
  it('finds plugin/package.json with the UIPlugin\'s version, and every file that files.txt lists', async() => {
    await rancherFetch(`${ server.base }/endpoint`);
  });

  // The chart's own server: its container's command, run with busybox
  // (make installs Debian's), on the files laid out as the kubelet lays
  // out a ConfigMap volume (a timestamped folder behind ..data symlinks).
  it('gets the same from the chart\'s server, busybox httpd on the ConfigMap volume', async() => {
    const deploy = rendered.objs.find((o) => o.kind === 'Deployment');
    const container = deploy.spec.template.spec.containers[0];
    const mount = container.volumeMounts[0].mountPath;
    const args = container.command.slice(1);

    expect(container.command[0]).toBe('httpd');
    expect(args[args.indexOf('-h') + 1]).toBe(mount);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sk-volume-'));
    const data = path.join(dir, '..2026_01_01_00_00_00.1');

    for (const [f, body] of rendered.files) {
      fs.mkdirSync(path.dirname(path.join(data, f)), { recursive: true });
      fs.writeFileSync(path.join(data, f), body);
    }
    fs.symlinkSync(path.basename(data), path.join(dir, '..data'));
    for (const top of new Set([...rendered.files.keys()].map((f) => f.split('/')[0]))) {
      fs.symlinkSync(path.join('..data', top), path.join(dir, top));
    }
    const port = await freePort();
    const local = args.map((a, i) => (args[i - 1] === '-p' ? `127.0.0.1:${ port }` : args[i - 1] === '-h' ? dir : a));
    const httpd = spawn('busybox', ['httpd', ...local], { stdio: 'inherit' });

    try {
      for (let i = 0; i < 50; i++) {
        if (await get(`http://127.0.0.1:${ port }/files.txt`).then(() => true, () => false)) {
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      await rancherFetch(`http://127.0.0.1:${ port }`);
    } finally {
      httpd.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Rancher\'s loader', () => {
  let dom;
  let result;

  beforeAll(async() => {
    const virtualConsole = new VirtualConsole();
    const logs = [];

    virtualConsole.on('jsdomError', (e) => logs.push(String(e.stack || e)));
    dom = await JSDOM.fromURL(server.hostURL, {
      runScripts: 'dangerously', resources: 'usable', pretendToBeVisual: true, virtualConsole
    });
    const body = dom.window.document.body;

    for (let i = 0; i < 200 && !body.getAttribute('data-host'); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    result = dom.window.hostResult;
    if (body.getAttribute('data-host') !== 'done') {
      throw new Error(`the host page did not finish: ${ JSON.stringify(result && result.errors) } ${ logs.join('\n') }`);
    }
  }, 30000);

  afterAll(() => dom && dom.window.close());

  it('runs the bundle\'s default export with a Plugin', () => {
    expect(result.errors).toEqual([]);
    expect(result.metadata.name).toBe(pkg.name);
    expect(result.metadata.version).toBe(pkg.version);
  });

  it('gets a Shards page under Continuous Delivery', () => {
    expect(result.routes).toHaveLength(1);
    const { parent, route } = result.routes[0];

    expect(parent).toBe('default');
    expect(route.name).toBe('c-cluster-fleet-shardkeeper');
    expect(route.path).toBe('/c/:cluster/fleet/shardkeeper');
    expect(route.meta.product).toBe('fleet');
    expect(result.products).toBe(1);
    const vt = result.nav.find((n) => n.kind === 'virtualType');

    expect(vt.product).toBe('fleet');
    expect(vt.arg.route.name).toBe(route.name);
    expect(result.nav.find((n) => n.kind === 'basicType').arg).toEqual([vt.arg.name]);
  });

  it('gets the Shard column on the GitRepo and HelmOp lists, and on App Bundles', () => {
    expect(result.columns).toHaveLength(2);
    const [lists, bundles] = result.columns;

    expect(lists.where).toBe('resource-list');
    expect(lists.when.resource).toEqual(['fleet.cattle.io.gitrepo', 'fleet.cattle.io.helmop']);
    // App Bundles (Rancher 2.12 and later) has no resource in its route:
    // Shell matches it by the end of its path.
    expect(bundles.where).toBe('resource-list');
    expect(bundles.when.path).toEqual([{ urlPath: '/fleet/application', endsWith: true }]);
    for (const c of result.columns) {
      expect(c.column.getValue({ metadata: { labels: { 'fleet.cattle.io/shard-ref': 's1' } } })).toBe('s1');
      expect(c.paginationColumn.value).toBe('metadata.labels[fleet.cattle.io/shard-ref]');
    }
  });

  it('renders the page from the bundle\'s own chunk, with the fixture\'s status', () => {
    const doc = dom.window.document;

    expect(server.served.some((u) => /\.umd\.min\.\d+\.js$/.test(u))).toBe(true);
    expect(doc.querySelector('[data-testid="sk-row-shard1"] [data-testid="sk-state"]').textContent.trim()).toBe('Blocked');
    expect(doc.querySelectorAll('[data-testid="sk-warning"]')).toHaveLength(2);
    expect(doc.querySelector('[data-testid="sk-events"]').textContent).toContain('ShardDeletionBlocked');
  });
});
