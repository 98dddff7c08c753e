module.exports = require('./.shell/pkg/babel.config.js');
