// Holds a request that found no ready replica (njs, loaded with nginx.hold_s above 0) until one is ready.
//
// Nginx answers 502 itself when every server of an upstream is `down` (no replica ready: `up` starting,
// the only replica restarting) or none it tried answered; error_page sends that here. A replica becoming
// ready reloads Nginx, but this request stays in a worker of the old config, whose upstream still lists
// every replica `down`: so the replicas ready now are read from the file the edge driver writes before
// each load ($hs_hold's file: {pool: [address, ...]}), and the request goes straight to one of them
// through @hs_held (outside the upstream: max_conns does not count it, the replica's own admission
// does). Only a pool this config routes to no replica of is held ($hs_hold's routed: its ready
// replicas by pool); a pool with some was full (max_conns) or failed the request, which is answered
// at once, as before (@unavailable).
// Written for njs 0.7 (Debian 12's libnginx-mod-http-js): ES5 syntax, setTimeout, fs.readFileSync.

var fs = require('fs');

function settings(r) {
    return JSON.parse(r.variables.hs_hold);
}

// The ready replicas of the request's pool ($hs_pool, set where a pool's upstream is proxied to; empty
// with one pool: every replica the file lists). A file not written yet counts as none ready.
function ready(r, file) {
    var table;
    try {
        table = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
        return [];
    }
    var pool = r.variables.hs_pool;
    if (pool) {
        return table[pool] || [];
    }
    var all = [];
    Object.keys(table).forEach(function (name) {
        all = all.concat(table[name]);
    });
    return all;
}

function send(r, addrs) {
    r.variables.hs_held = addrs[Math.floor(Math.random() * addrs.length)];
    r.internalRedirect('@hs_held');
}

function hold(r) {
    var conf = settings(r);
    // Sent on once already (the replica went away again before answering): not held a second time.
    if (r.variables.hs_held || conf.routed[r.variables.hs_pool] !== 0) {
        r.internalRedirect('@unavailable');
        return;
    }
    function check() {
        var addrs = ready(r, conf.file);
        if (addrs.length) {
            send(r, addrs);
        } else if (Number(r.variables.request_time) + conf.poll_s > conf.hold_s) {
            r.internalRedirect('@unavailable');
        } else {
            setTimeout(check, conf.poll_s * 1000);
        }
    }
    check();
}

export default {hold: hold};
