#!/usr/bin/env node
// kusto_check.js: checks KQL with Microsoft's own Kusto parser/binder (Kusto.Language, the
// Bridge.NET build shipped in the npm package @kusto/language-service-next). Test-only helper.
//
//   npm ci --prefix tests/kql          # once; or set KUSTO_LS_DIR to the package folder
//   node tests/kql/kusto_check.js --schema bot/sentinel/tables.json [--functions tests/kql/functions.json] < q.jsonl
//
// --schema: {"Table": [{"name": "Col", "type": "string"}, ...], ...}, or the table catalog's
//           {"Table": {"columns": [{"name": "Col", "type": "string"}, ...], ...}, ...}
// --functions: the workspace's functions the queries call (Sentinel's _GetWatchlist):
//   {"name": {"parameters": "(p: string)", "body": "{ <KQL giving its result> }"}, ...}
// stdin:    one JSON object per line: {"id": <any>, "query": "<KQL>"}
// stdout:   one JSON object per input line, same order:
//   {"id", "ok", "errors": [{"code", "message", "line", "column", "text"}],
//    "result_columns": [{"name", "type"}] | null, "string_literals": [{"text", "value"}]}
//   ok: no diagnostic of severity Error (syntax or semantic). line/column are 1-based and
//   column counts Unicode code points (like Python's str indexing).
//   string_literals: every StringLiteralToken of the syntax tree in source order, including the
//   strings inside dynamic(...) literals and bracketed names like ['my col'].
//   text is the raw token text, value the decoded value (token.ValueText).
// Exit: 0 all ok, 1 some query not ok, 2 usage/setup problem.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

function usage(msg) {
  process.stderr.write('kusto_check: ' + msg + '\n');
  process.exit(2);
}

function loadKusto() {
  const dir = process.env.KUSTO_LS_DIR ||
    path.join(__dirname, 'node_modules', '@kusto', 'language-service-next');
  const files = ['bridge.js', 'Kusto.Language.Bridge.js'].map(f => path.join(dir, f));
  if (!files.every(f => fs.existsSync(f))) {
    usage(`@kusto/language-service-next not found in ${dir}; fix: npm ci --prefix tests/kql`);
  }
  files.forEach(f => require(f)); // bridge.js defines global Bridge/System, then global Kusto
  return global.Kusto.Language;
}

function readFunctions(K, functionsPath) {
  if (!functionsPath) return [];
  let functions;
  try {
    functions = JSON.parse(fs.readFileSync(functionsPath, 'utf8'));
  } catch (e) {
    usage(`cannot read functions ${functionsPath}: ${e.message}`);
  }
  // FunctionSymbol(name, parameterList, body, description): the binder takes the result columns from the body.
  return Object.entries(functions).map(([name, f]) =>
    new K.Symbols.FunctionSymbol.$ctor16(name, String(f.parameters), String(f.body), ''));
}

function buildGlobals(K, schemaPath, functionsPath) {
  let schema;
  try {
    schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
  } catch (e) {
    usage(`cannot read schema ${schemaPath}: ${e.message}`);
  }
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) usage('schema must be a JSON object');
  const S = K.Symbols;
  const tables = Object.entries(schema).map(([table, entry]) => {
    const cols = Array.isArray(entry) ? entry : (entry && entry.columns);
    if (!Array.isArray(cols)) usage(`schema: table ${table} must map to a list of columns`);
    const columns = cols.map(c => {
      const type = S.ScalarTypes.GetSymbol(String(c.type));
      if (!type) usage(`schema: ${table}.${c.name} has unknown type ${JSON.stringify(c.type)}`);
      return new S.ColumnSymbol(c.name, type, null, null, null, null);
    });
    return new S.TableSymbol.$ctor4(table, columns);
  });
  const members = tables.concat(readFunctions(K, functionsPath));
  return K.GlobalState.Default.WithDatabase(new S.DatabaseSymbol.ctor('db', members));
}

function position(text, offset) {
  const before = text.slice(0, offset);
  const lineStart = before.lastIndexOf('\n') + 1;
  return {
    line: before.split('\n').length,
    column: Array.from(before.slice(lineStart)).length + 1,
  };
}

function check(K, globals, query) {
  const code = K.KustoCode.ParseAndAnalyze(query, globals);

  const errors = Bridge.toArray(code.GetDiagnostics())
    .filter(d => d.Severity === K.DiagnosticSeverity.Error)
    .map(d => {
      const start = d.HasLocation ? d.Start : 0;
      return {
        code: d.Code,
        message: d.Message,
        ...position(query, start),
        text: d.HasLocation ? query.substr(d.Start, d.Length) : '',
      };
    });

  const rt = code.ResultType;
  const resultColumns = rt instanceof K.Symbols.TableSymbol
    ? Bridge.toArray(rt.Columns).map(c => ({ name: c.Name, type: c.Type.Name }))
    : null;

  const literals = [];
  code.Syntax.WalkTokens(tok => {
    if (tok.Kind === K.Syntax.SyntaxKind.StringLiteralToken && !tok.IsMissing) {
      literals.push({ text: tok.Text, value: tok.ValueText });
    }
  });

  return { ok: errors.length === 0, errors, result_columns: resultColumns, string_literals: literals };
}

async function main() {
  const args = process.argv.slice(2);
  const help = 'usage: kusto_check.js --schema PATH [--functions PATH] < queries.jsonl';
  let schemaPath = null;
  let functionsPath = null;
  for (let i = 0; i < args.length; i++) {
    if (args[i] !== '--schema' && args[i] !== '--functions') usage(`unexpected argument ${JSON.stringify(args[i])}; ${help}`);
    if (i + 1 >= args.length) usage(`${args[i]} needs a PATH; ${help}`);
    if (args[i] === '--schema') schemaPath = args[++i];
    else functionsPath = args[++i];
  }
  if (!schemaPath) usage(`missing --schema PATH; ${help}`);

  const K = loadKusto();
  const globals = buildGlobals(K, schemaPath, functionsPath);

  let exitCode = 0;
  let lineNo = 0;
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    lineNo++;
    if (!line.trim()) continue;
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      req = null;
    }
    if (!req || typeof req !== 'object' || typeof req.query !== 'string') {
      process.stderr.write(`kusto_check: stdin line ${lineNo}: expected {"id": ..., "query": "<KQL>"}\n`);
      exitCode = 2;
      continue;
    }
    const result = check(K, globals, req.query);
    if (!result.ok && exitCode === 0) exitCode = 1;
    process.stdout.write(JSON.stringify({ id: req.id === undefined ? null : req.id, ...result }) + '\n');
  }
  process.exitCode = exitCode;
}

main().catch(e => usage(`internal error: ${e && e.stack || e}`));
