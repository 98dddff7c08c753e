// A local HTTP server for the extension's bundle tests. It serves the
// files of the extension chart as rendered by helm: at /endpoint/ as the
// chart's in-cluster server does (the UIPlugin's endpoint), and at
// /v1/uiplugins/<name>/<version>/ as Rancher serves them to browsers after
// caching them. Beside them: the test host page, the globals Rancher
// provides to extensions, and the fixtures.
//
//   node test/server.js <staged chart dir>    serves until killed, for the screenshot
const http = require('http');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const jsyaml = require('js-yaml');

const UI = path.resolve(__dirname, '..');
const TYPES = {
  '.html': 'text/html', '.js': 'application/javascript', '.json': 'application/json', '.txt': 'text/plain'
};

/** The helm binary: make builds it into bin/ (SHARDKEEPER_BIN_DIR). */
function helmBin() {
  return process.env.SHARDKEEPER_HELM || path.join(process.env.SHARDKEEPER_BIN_DIR || path.join(UI, '..', 'bin'), 'helm');
}

/** The staged extension chart (with its files): make ui-chart writes it. */
function chartDir() {
  return process.env.SHARDKEEPER_UI_CHART || path.join(UI, '..', 'dist', 'extension-chart', 'shardkeeper-extension');
}

/**
 * Renders the chart, and returns its UIPlugin and the files its server
 * would serve: each ConfigMap key at the path its volume item gives.
 */
function renderChart(dir = chartDir(), args = []) {
  if (!fs.existsSync(path.join(dir, 'files'))) {
    throw new Error(`${ dir } is not a staged extension chart: run make ui-chart`);
  }
  const out = execFileSync(helmBin(), ['template', 'shardkeeper-extension', dir, '--namespace', 'cattle-ui-plugin-system', ...args], { encoding: 'utf8' });
  const objs = jsyaml.loadAll(out).filter(Boolean);
  const uiplugin = objs.find((o) => o.kind === 'UIPlugin');
  const cm = objs.find((o) => o.kind === 'ConfigMap');
  const deploy = objs.find((o) => o.kind === 'Deployment');
  const files = new Map();

  if (cm && deploy) {
    const vol = deploy.spec.template.spec.volumes.find((v) => v.configMap && v.configMap.name === cm.metadata.name);

    for (const item of vol.configMap.items) {
      files.set(item.path, Buffer.from(cm.binaryData[item.key], 'base64'));
    }
  }

  return { objs, uiplugin, files };
}

function start(files, name, version) {
  const rancherBase = `/v1/uiplugins/${ name }/${ version }/`;
  const fixtures = path.join(UI, 'pkg', name, 'fixtures');
  const vendor = {
    'vue.global.prod.js': require.resolve('vue/dist/vue.global.prod.js', { paths: [UI] }),
    // js-yaml 4 exports no dist/ path: the file is found beside its package.json.
    'js-yaml.min.js':     path.join(path.dirname(require.resolve('js-yaml/package.json', { paths: [UI] })), 'dist', 'js-yaml.min.js'),
  };
  const served = [];
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(req.url.split('?')[0]);
    let body = null;

    served.push(url);
    if (url.startsWith('/endpoint/')) {
      body = files.get(url.slice('/endpoint/'.length)) || null;
    } else if (url.startsWith(rancherBase)) {
      body = files.get(url.slice(rancherBase.length)) || null;
    } else if (url === '/host.html') {
      body = fs.readFileSync(path.join(__dirname, 'host.html'));
    } else if (url.startsWith('/vendor/') && vendor[url.slice(8)]) {
      body = fs.readFileSync(vendor[url.slice(8)]);
    } else if (url.startsWith('/fixtures/') && /^[a-z]+\.json$/.test(url.slice(10))) {
      body = fs.readFileSync(path.join(fixtures, url.slice(10)));
    }
    if (body === null) {
      res.writeHead(404);
      res.end('not found');

      return;
    }
    res.writeHead(200, { 'Content-Type': TYPES[path.extname(url)] || 'application/octet-stream' });
    res.end(body);
  });

  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const base = `http://127.0.0.1:${ server.address().port }`;

      resolve({
        base,
        served,
        hostURL: `${ base }/host.html?name=${ encodeURIComponent(name) }&version=${ encodeURIComponent(version) }`,
        close:   () => new Promise((r) => server.close(r)),
      });
    });
  });
}

module.exports = { renderChart, start };

if (require.main === module) {
  const { uiplugin, files } = renderChart(process.argv[2]);

  start(files, uiplugin.spec.plugin.name, uiplugin.spec.plugin.version).then((s) => {
    console.log(s.hostURL); // eslint-disable-line no-console
  });
}
