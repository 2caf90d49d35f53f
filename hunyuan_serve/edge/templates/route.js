// Routes a request to the pool serving the model its JSON body names (njs, loaded only with several pools).
//
// The tables come from the rendered nginx.conf: $hs_routes (each served name's named location, and that
// of a request naming no model) and $hs_error_model_not_found (the 404 in the path's API shape, from
// hunyuan_serve/edge/dialects.py), so this file is the same for every deployment. Written for njs 0.7 (Debian 12's
// libnginx-mod-http-js): ES5 syntax, r.requestText, r.internalRedirect to a named location, which keeps
// the body already read for proxy_pass (ngx_http_js_module.c: ngx_http_named_location after the handler).

var PLACEHOLDER = '{model}';

function routes(r) {
    return JSON.parse(r.variables.hs_routes);
}

// The body's `model` when it is a string; undefined when there is none, or the body is no JSON object
// (the replica then answers it as it always did, its 400 in its own shape).
function bodyModel(r) {
    var text = r.requestText;
    if (!text) {
        return undefined;
    }
    var body;
    try {
        body = JSON.parse(text);
    } catch (e) {
        return undefined;
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        return undefined;
    }
    return typeof body.model === 'string' ? body.model : undefined;
}

function notFound(r, model) {
    // split/join, not replace: a model holding "$&" would be a replacement pattern.
    var name = JSON.stringify(model.slice(0, 100)).slice(1, -1);
    var body = r.variables.hs_error_model_not_found.split(PLACEHOLDER).join(name);
    r.headersOut['Content-Type'] = 'application/json';
    r.return(404, body);
}

function send(r, table, model) {
    if (model === undefined) {
        r.internalRedirect(table['default']);
    } else if (Object.prototype.hasOwnProperty.call(table.models, model)) {
        r.internalRedirect(table.models[model]);
    } else {
        notFound(r, model);
    }
}

// /translate, /v1/chat/completions, /v1/completions: by the body's model.
function route(r) {
    send(r, routes(r), bodyModel(r));
}

// GET /v1/models/ID: by the model in the path (the pool's replica answers its card).
function model(r) {
    send(r, routes(r), r.uri.slice('/v1/models/'.length));
}

// GET /v1/models with API keys: the default pool checks the key (Nginx holds none); with its 200 the
// list of every pool, else its refusal as it answered it.
function models(r) {
    var args = r.variables.args ? '?' + r.variables.args : '';
    // Under /v1/, so the edge's own errors there (no replica ready: 503) speak OpenAI's shape too.
    r.subrequest('/v1/_hs/models_check' + args, {method: 'GET'}, function (reply) {
        if (reply.status !== 200) {
            ['Content-Type', 'WWW-Authenticate'].forEach(function (name) {
                if (reply.headersOut[name]) {
                    r.headersOut[name] = reply.headersOut[name];
                }
            });
            if (reply.status === 503) {  // the edge's own 503 (add_header skips a subrequest's)
                r.headersOut['Retry-After'] = String(routes(r).retry_after);
            }
            r.return(reply.status, reply.responseText);
            return;
        }
        r.headersOut['Content-Type'] = 'application/json';
        r.return(200, JSON.stringify(routes(r).list));
    });
}

export default {route: route, model: model, models: models};
