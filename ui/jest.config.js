// The extension's unit tests: the status parser, and the page and dialogs
// mounted against a mocked store (babel.config.js compiles them); and in
// test/, the built extension as its chart ships it (make ui-chart first).
module.exports = {
  testEnvironment:        'jsdom',
  testEnvironmentOptions: { customExportConditions: ['node', 'node-addons'] },
  roots:                  ['<rootDir>/pkg', '<rootDir>/test'],
  moduleFileExtensions:   ['ts', 'js', 'json', 'vue'],
  transform:              {
    '^.+\\.(ts|js)$': 'babel-jest',
    '^.+\\.vue$':     '@vue/vue3-jest',
  },
  testMatch: ['**/__tests__/**/*.test.ts', '<rootDir>/test/**/*.test.js'],
};
