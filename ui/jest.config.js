// The extension's unit tests: the status parser and the page and dialogs
// mounted against a mocked store. TypeScript and Vue files are compiled
// with their own settings (not Shell's babel config, which adds coverage
// instrumentation under NODE_ENV=test).
const babel = {
  configFile: false,
  babelrc:    false,
  presets:    [['@babel/preset-env', { targets: { node: 'current' } }], '@babel/preset-typescript'],
};

module.exports = {
  testEnvironment:      'jsdom',
  testEnvironmentOptions: { customExportConditions: ['node', 'node-addons'] },
  roots:                ['<rootDir>/pkg'],
  moduleFileExtensions: ['ts', 'js', 'json', 'vue'],
  transform:            {
    '^.+\\.(ts|js)$': ['babel-jest', babel],
    '^.+\\.vue$':     '@vue/vue3-jest',
  },
  globals: { 'vue-jest': { babelConfig: babel } },
  transformIgnorePatterns: ['/node_modules/'],
  testMatch:            ['**/__tests__/**/*.test.ts', '**/test/**/*.test.js'],
};
