// Babel for the unit tests (jest, with vue3-jest for the .vue files). The
// package build (yarn build-pkg) runs in pkg/shardkeeper-extension and takes Shell's
// package config from there.
module.exports = {
  presets: [
    ['@babel/preset-env', { targets: { node: 'current' } }],
    '@babel/preset-typescript',
  ],
};
