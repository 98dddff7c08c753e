// The extension's unit tests: the status parser, and the page and dialogs
// mounted against a mocked store (babel.config.js compiles them).
module.exports = {
  testEnvironment:        'jsdom',
  testEnvironmentOptions: { customExportConditions: ['node', 'node-addons'] },
  roots:                  ['<rootDir>/pkg'],
  moduleFileExtensions:   ['ts', 'js', 'json', 'vue'],
  transform:              {
    '^.+\\.(ts|js)$': 'babel-jest',
    '^.+\\.vue$':     '@vue/vue3-jest',
  },
  testMatch: ['**/__tests__/**/*.test.ts'],
};
