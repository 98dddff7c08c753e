#!/usr/bin/env node
// Lays out a built extension (dist-pkg/<name>-<version>) the way Rancher
// fetches it from a UIPlugin's endpoint: <endpoint>/plugin/package.json,
// <endpoint>/files.txt, and every file that files.txt lists, relative to
// the endpoint. The bundle analyzer's report and the source maps stay out:
// Rancher never asks for them, and the files travel in a ConfigMap.
//
//   node scripts/layout.js dist-pkg/shardkeeper-0.1.0 dist/extension
const fs = require('fs');
const path = require('path');

const [src, out] = process.argv.slice(2);

if (!src || !out) {
  console.error('usage: layout.js <dist-pkg/name-version> <out>'); // eslint-disable-line no-console
  process.exit(2);
}
const keep = (f) => f === 'package.json' || (f.endsWith('.js') && !f.endsWith('.map'));
const files = fs.readdirSync(src).filter(keep).sort();

if (!files.includes('package.json') || !files.some((f) => f.endsWith('.umd.min.js'))) {
  console.error(`${ src } holds no built extension (package.json and *.umd.min.js): run yarn build-pkg first`); // eslint-disable-line no-console
  process.exit(1);
}
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(path.join(out, 'plugin'), { recursive: true });
for (const f of files) {
  fs.copyFileSync(path.join(src, f), path.join(out, 'plugin', f));
}
fs.writeFileSync(path.join(out, 'files.txt'), `${ files.map((f) => `plugin/${ f }`).join('\n') }\n`);
console.log(`${ out }: ${ files.length } files`); // eslint-disable-line no-console
