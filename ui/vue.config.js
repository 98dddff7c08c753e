// The extension is built with Shell's package build (yarn build-pkg);
// nothing here is served as an app.
module.exports = require('@rancher/shell/vue.config')(__dirname, { excludes: [] });
