/* Conveyor's pages: live updates, uploads with progress, the transcript player.
 * Plain browser JavaScript, no build step, no dependencies. */
"use strict";
(function () {
  var csrf = document.body.dataset.csrf || "";

  function announce(text) {
    var region = document.getElementById("announce");
    if (!region) return;
    var line = document.createElement("p");
    line.textContent = text;
    region.appendChild(line);
    while (region.childNodes.length > 5) region.removeChild(region.firstChild);
  }

  function setLive(text) {
    var el = document.getElementById("live-status");
    if (!el) return;
    if (text) { el.textContent = text; el.hidden = false; } else { el.textContent = ""; el.hidden = true; }
  }

  function logActivity(text, key, id) {
    var list = document.getElementById("activity");
    if (!list) return;
    var li = document.createElement("li");
    li.className = "activity-entry";
    if (key) li.dataset[key] = String(id);
    li.textContent = text;
    list.insertBefore(li, list.firstChild);
    var none = document.getElementById("activity-none");
    if (none) none.hidden = true;
  }

  /* Follow a Server-Sent Events stream, resuming after the last id seen: on a drop the page
   * says it is reconnecting and, once back, receives every missed event exactly once. */
  function follow(url, lastId, onEvent) {
    var source = null, retry = 1000, seen = lastId;
    function open() {
      var sep = url.indexOf("?") < 0 ? "?" : "&";
      source = new EventSource(url + sep + "last_event_id=" + seen);
      source.onopen = function () { retry = 1000; setLive(""); };
      function handle(ev) {
        var id = parseInt(ev.lastEventId, 10);
        if (!(id > seen)) return;  /* never twice */
        seen = id;
        onEvent(JSON.parse(ev.data), ev.type);
      }
      ["record", "item.ready", "item.playback_ready", "item.halted", "message"].forEach(function (t) {
        source.addEventListener(t, handle);
      });
      source.onerror = function () {
        source.close();
        setLive("Connection lost; reconnecting…");
        setTimeout(open, retry);
        retry = Math.min(retry * 2, 15000);
      };
    }
    open();
    window.addEventListener("pagehide", function () { if (source) source.close(); });
  }

  function fetchHtml(url) {
    return fetch(url, { headers: { Accept: "text/html-fragment" }, credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        var t = document.createElement("template");
        t.innerHTML = html.trim();
        return t.content.firstElementChild;
      });
  }

  /* Relative "time in stage" stays current without a reload. */
  function words(seconds) {
    var s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) { var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60); return h + " h" + (m ? " " + m + " min" : ""); }
    var d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600); return d + " d" + (hh ? " " + hh + " h" : "");
  }
  function tick() {
    document.querySelectorAll("time[data-since]").forEach(function (el) {
      var t = Date.parse(el.dataset.since);
      if (!isNaN(t)) el.textContent = words((Date.now() - t) / 1000);
    });
    /* "retrying in 40 s" counts down, and says "a moment" once it is due (the row is
     * swapped in again when the try happens). */
    document.querySelectorAll("time[data-until]").forEach(function (el) {
      var t = Date.parse(el.dataset.until);
      if (isNaN(t)) return;
      var left = (t - Date.now()) / 1000;
      el.textContent = left >= 1 ? words(left) : "a moment";
    });
  }
  setInterval(tick, 1000);

  /* The recordings list: rows change, appear (in id order, on the page they belong to) or
   * leave a filtered list as records move; the counts above it follow. */
  var records = document.getElementById("records");
  function matchesFilter(row) {
    var show = records.dataset.show, stage = records.dataset.stage;
    var halted = row.dataset.halted === "true", done = row.dataset.stage === "done";
    if (show === "halted" && !halted) return false;
    if (show === "done" && (halted || !done)) return false;
    if (show === "waiting" && (halted || done)) return false;
    return !stage || row.dataset.stage === stage;
  }
  function placeRow(row) {
    var old = document.getElementById(row.id);
    if (!matchesFilter(row)) { if (old) old.remove(); return; }
    if (old) { old.replaceWith(row); return; }
    var id = parseInt(row.dataset.id, 10), after = null, newest = null;
    records.querySelectorAll(".record-row").forEach(function (r) {
      var rid = parseInt(r.dataset.id, 10);
      if (newest === null || rid > newest) newest = rid;
      if (!after && rid < id) after = r;
    });
    /* Newer than every row here: it belongs on an earlier page unless this is the first. */
    if (newest !== null && id > newest && records.dataset.firstPage !== "true") return;
    /* Older than every row here: it belongs on a later page if there is one. */
    if (!after && records.dataset.more === "true") return;
    var empty = records.querySelector(".empty");
    if (empty) empty.remove();
    records.insertBefore(row, after);
  }
  var countsPending = false;
  function refreshCounts() {
    if (countsPending) return;
    countsPending = true;
    setTimeout(function () {
      fetchHtml("/records/counts").then(function (p) {
        countsPending = false;
        var old = document.getElementById("record-counts");
        if (old) old.replaceWith(p);
      }).catch(function () { countsPending = false; });
    }, 200);
  }
  if (records && records.dataset.live) {
    follow(records.dataset.live, parseInt(records.dataset.lastEventId, 10) || 0, function (ev) {
      var said = ev.words || (ev.outcome + " at " + ev.stage);
      /* Why it stopped or failed is said; the engine's note of a step that went well
       * ("submitted to local", a sample format) is not a person's business. */
      if (ev.outcome_text && (ev.outcome === "halted" || ev.outcome === "failed")) said += " (" + ev.outcome_text + ")";
      refreshCounts();
      fetchHtml("/records/" + ev.record_id + "/row").then(function (row) {
        var name = row.querySelector(".record-name").textContent;
        logActivity(name + ": " + said, "record", ev.record_id);
        placeRow(row);
        announce(name + ": " + row.querySelector(".record-status").textContent.replace(/\s+/g, " ").trim());
      }).catch(function () {});
    });
  }

  /* A record page: live status; the transcript and its correction form are swapped in when
   * the record is done (the player keeps playing). */
  var recordLive = document.getElementById("record-live");
  function fetchText(recordId) {
    fetchHtml("/records/" + recordId + "/text").then(function (parts) {
      ["record-text", "record-proofread"].forEach(function (id) {
        var old = document.getElementById(id), part = parts.querySelector("#" + id);
        if (old && part) old.replaceWith(part);
      });
      var text = document.getElementById("record-text");
      if (text && text.dataset.hasText === "true") announce("The transcript is ready.");
    }).catch(function () {});
  }
  if (recordLive) {
    follow(recordLive.dataset.live, parseInt(recordLive.dataset.lastEventId, 10) || 0, function (ev) {
      fetchHtml("/records/" + recordLive.dataset.record + "/status").then(function (box) {
        var old = document.getElementById("record-status");
        if (old) old.replaceWith(box);
        announce(box.textContent.replace(/\s+/g, " ").trim());
        var text = document.getElementById("record-text");
        if (box.dataset.stage === "done" && text && text.dataset.hasText !== "true") {
          fetchText(recordLive.dataset.record);
        }
      }).catch(function () {});
    });
  }

  /* An album's grid: tiles appear and fill in as variants become ready, newest capture
     first (upload time until the capture time is read; id breaks ties), as the server sorts. */
  var grid = document.getElementById("grid");
  function sortsBefore(a, b) {
    var ta = parseFloat(a.dataset.taken), tb = parseFloat(b.dataset.taken);
    if (ta !== tb) return ta > tb;
    return parseInt(a.dataset.id, 10) > parseInt(b.dataset.id, 10);
  }
  var counted = {};
  function placeTile(tile) {
    var id = parseInt(tile.dataset.id, 10);
    var old = document.getElementById(tile.id);
    if (old) {
      /* A tile swapped in live keeps its tick. */
      var was = old.querySelector("input[name=item]"), now = tile.querySelector("input[name=item]");
      if (was && now) now.checked = was.checked;
      old.remove();
    } else if (id > (parseInt(grid.dataset.newestId, 10) || 0) && !counted[id]) {
      /* A new upload (not an item of another page): counted once, whichever page shows. */
      counted[id] = true;
      var total = document.getElementById("grid-total");
      if (total) total.textContent = String((parseInt(total.textContent, 10) || 0) + 1);
      var empty = document.getElementById("grid-empty");
      if (empty) empty.remove();
    }
    /* Its place by capture time: a photo taken years ago moves down once that is read. */
    var tiles = grid.querySelectorAll(".tile"), after = null;
    tiles.forEach(function (t) {
      if (!after && sortsBefore(tile, t)) after = t;
    });
    /* Outside this page's span (before its first tile on an older page, past its last one
       with older pages after it): it is shown on that other page, not here. */
    if (grid.dataset.firstPage !== "true" && tiles.length && after === tiles[0]) return;
    if (!after && tiles.length && document.querySelector(".pager a[rel=next]")) return;
    grid.insertBefore(tile, after);
  }
  if (grid && grid.dataset.live) {
    follow(grid.dataset.live, parseInt(grid.dataset.lastEventId, 10) || 0, function (ev, type) {
      var said = { "item.ready": "ready", "item.playback_ready": "ready to play", "item.halted": "stopped" }[type] || type.replace("item.", "").replace("_", " ");
      /* A link's page lives under its own address (data-base): its tiles come from there. */
      fetchHtml((grid.dataset.base || "") + "/items/" + ev.item_id + "/tile").then(function (tile) {
        logActivity(tile.querySelector(".tile-name").textContent + ": " + said, "item", ev.item_id);
        placeTile(tile);
        announce(tile.querySelector(".tile-name").textContent + ": " + tile.querySelector(".tile-status").textContent.replace(/\s+/g, " ").trim());
      }).catch(function () {});
    });
  }

  /* Choosing several tiles: the count says how many; Delete posts them to a page that names
   * each; Download fetches each original in turn (the browser may ask once to allow it). */
  var selection = document.getElementById("grid-select");
  function chosenBoxes() {
    return Array.prototype.filter.call(document.querySelectorAll("#grid input[name=item]"), function (b) { return b.checked; });
  }
  function showChosen() {
    var n = chosenBoxes().length, count = document.getElementById("chosen-count");
    count.textContent = n ? n + " chosen" : "Tick photos and videos to delete or download several.";
    document.getElementById("delete-chosen").disabled = n === 0;
    document.getElementById("download-chosen").hidden = n === 0;
  }
  if (selection && grid) {
    grid.addEventListener("change", function (e) { if (e.target.name === "item") showChosen(); });
    document.getElementById("download-chosen").addEventListener("click", function () {
      chosenBoxes().forEach(function (b, i) {
        if (!b.dataset.original) return;
        setTimeout(function () {
          var a = document.createElement("a");
          a.href = b.dataset.original; a.download = b.dataset.name || "";
          document.body.appendChild(a); a.click(); a.remove();
        }, i * 400);
      });
    });
    showChosen();
  }

  /* The viewer of one photo or video: its status, then its picture or video, swapped in as
   * the album's stream tells of this item (the player is replaced only when a new variant
   * arrived, so a video that plays keeps playing). */
  var itemLive = document.getElementById("item-live");
  if (itemLive) {
    var itemId = parseInt(itemLive.dataset.item, 10);
    follow(itemLive.dataset.live, parseInt(itemLive.dataset.lastEventId, 10) || 0, function (ev) {
      if (ev.item_id !== itemId) return;
      fetchHtml((itemLive.dataset.base || "") + "/items/" + itemId + "/view").then(function (view) {
        var old = document.getElementById("item-view");
        if (!old) return;
        if (old.dataset.roles === view.dataset.roles) {
          old.querySelector("#item-status").replaceWith(view.querySelector("#item-status"));
          old.dataset.stage = view.dataset.stage;
          old.dataset.halted = view.dataset.halted;
        } else {
          old.replaceWith(view);
        }
        announce(document.getElementById("item-status").textContent.replace(/\s+/g, " ").trim());
      }).catch(function () {});
    });
  }

  /* The operator view stays current: every few seconds (while the tab is shown) its
   * sections are read again and swapped in, each section by its id, so a panel added later
   * (with an id) follows too; a section holding the focus or a changed field is left alone. */
  var operatorLive = document.getElementById("operator-live");
  function busy(section) {
    if (section.contains(document.activeElement) && document.activeElement !== document.body) return true;
    return Array.prototype.some.call(section.querySelectorAll("input:not([type=hidden]), textarea, select"), function (f) {
      return f.value !== (f.defaultValue === undefined ? f.value : f.defaultValue);
    });
  }
  if (operatorLive) {
    setInterval(function () {
      if (document.hidden) return;
      fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" })
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html");
          fresh.querySelectorAll("main section.card[id]").forEach(function (section) {
            var old = document.getElementById(section.id);
            if (old && !busy(old)) old.replaceWith(document.importNode(section, true));
          });
          setLive("");
        })
        .catch(function () { setLive("The operator view could not be refreshed; trying again."); });
    }, parseInt(operatorLive.dataset.refresh, 10) || 10000);
  }

  /* The viewer: Full size (or a click on the picture) shows the original at its own size in
   * a box that scrolls; the arrow keys and a sideways swipe go to the newer or older item. */
  if (itemLive) {
    document.addEventListener("click", function (e) {
      var button = e.target.closest ? e.target.closest("#zoom, #viewer-img") : null;
      if (!button) return;
      var box = document.getElementById("zoom-box"), img = document.getElementById("viewer-img");
      var zoom = document.getElementById("zoom");
      if (!box || !img || !zoom) return;
      var on = !box.classList.contains("zoomed");
      if (on && !img.dataset.small) { img.dataset.small = img.src; }
      img.src = on ? zoom.dataset.full : img.dataset.small;
      box.classList.toggle("zoomed", on);
      zoom.setAttribute("aria-pressed", on ? "true" : "false");
      zoom.textContent = on ? "Fit to screen" : "Full size";
      /* The box that scrolls takes the keys (the arrows pan it); fitted, the button has them. */
      if (on) { box.tabIndex = 0; box.focus({ preventScroll: true }); } else { box.removeAttribute("tabindex"); zoom.focus(); }
    });
    /* A step clicks the Newer/Older link itself (the navigation the buttons make), once per
     * press: a held key's repeats, or a second press before the page has gone, start no
     * second navigation. While the picture is zoomed the arrow keys pan it, as a swipe does. */
    var stepping = false;
    var go = function (id) {
      var a = document.getElementById(id);
      if (!a || stepping) return;
      stepping = true;
      a.click();
    };
    window.addEventListener("pageshow", function () { stepping = false; });  /* back (bfcache) */
    document.addEventListener("keydown", function (e) {
      if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || /^(INPUT|TEXTAREA|SELECT|VIDEO)$/.test(e.target.tagName)) return;
      var to = e.key === "ArrowLeft" ? "newer" : e.key === "ArrowRight" ? "older" : null;
      var box = document.getElementById("zoom-box");
      if (!to || (box && box.classList.contains("zoomed"))) return;
      e.preventDefault();
      if (!e.repeat) go(to);
    });
    var touchX = null, touchY = null;
    document.addEventListener("touchstart", function (e) {
      if (e.touches.length !== 1) { touchX = null; return; }
      touchX = e.touches[0].clientX; touchY = e.touches[0].clientY;
    }, { passive: true });
    document.addEventListener("touchend", function (e) {
      if (touchX === null) return;
      var box = document.getElementById("zoom-box");
      if (box && box.classList.contains("zoomed")) return;  /* a zoomed picture pans instead */
      var dx = e.changedTouches[0].clientX - touchX, dy = e.changedTouches[0].clientY - touchY;
      touchX = null;
      if (Math.abs(dx) > 60 && Math.abs(dx) > 2 * Math.abs(dy)) go(dx > 0 ? "newer" : "older");
    }, { passive: true });
  }

  /* Uploads: drag and drop or choose several files; each goes on its own with progress.
   * One queue for the page never sends more at once than the owner's upload slots
   * (data-upload-slots, the server's [api] uploads_per_owner); a file the server turns away
   * for now (429, 503) waits for its Retry-After and goes again, and one whose connection
   * dropped is sent again after a pause (a few times). Any other refusal is final and its
   * line says why. */
  var uploadQueue = [], uploadsActive = 0;
  var MAX_DROPS = 5;
  /* Files from this size on go in resumable pieces of this size (tus). */
  var RESUMABLE_FROM = 16 * 1024 * 1024, RESUMABLE_PIECE = 8 * 1024 * 1024;
  function pumpUploads() {
    var slots = parseInt(document.body.dataset.uploadSlots, 10) || 4;
    while (uploadsActive < slots && uploadQueue.length) {
      uploadsActive += 1;
      uploadQueue.shift()();
    }
  }
  function retryAfter(xhr) {
    var s = parseInt(xhr.getResponseHeader("Retry-After"), 10);
    return s > 0 ? Math.min(s, 600) : 5;
  }
  document.querySelectorAll(".dropzone").forEach(function (zone) {
    var input = zone.querySelector("input[type=file]");
    var list = zone.parentNode.querySelector(".uploads");
    var options = zone.dataset.options ? document.getElementById(zone.dataset.options) : null;
    /* The options as they are when a file is dropped: set them, then add files. An empty one
     * is left out (the server's default: detect the language, no hints). */
    function chosen() {
      var values = [];
      if (!options) return values;
      options.querySelectorAll("input[name], textarea[name], select[name]").forEach(function (el) {
        if (el.type === "checkbox" && !el.checked) return;
        var value = el.value.trim();
        if (value) values.push([el.name, value]);
      });
      return values;
    }
    function add(file) {
      var fields = chosen(), drops = 0, countdown = null;
      var li = document.createElement("li");
      var name = document.createElement("span");
      name.className = "upload-name";
      name.textContent = file.name;
      name.title = file.name;
      name.tabIndex = 0;
      var bar = document.createElement("progress");
      bar.max = 100; bar.value = 0;
      bar.setAttribute("aria-label", "Upload of " + file.name);
      var state = document.createElement("span");
      state.className = "upload-state";
      state.textContent = "waiting to send";
      li.append(name, " ", bar, " ", state);
      list.appendChild(li);
      function later(seconds, why) {
        var left = seconds;
        li.className = "upload-waiting";
        state.textContent = why + "; retrying in " + left + " s";
        countdown = setInterval(function () {
          left -= 1;
          if (left > 0) { state.textContent = why + "; retrying in " + left + " s"; return; }
          clearInterval(countdown);
          state.textContent = "waiting to send";
          uploadQueue.unshift(start);
          pumpUploads();
        }, 1000);
      }
      function finish() { uploadsActive -= 1; pumpUploads(); }
      function uploaded(url) {
        bar.value = 100;
        state.textContent = "";
        var a = document.createElement("a");
        a.href = url; a.textContent = "uploaded";
        state.appendChild(a);
        li.className = "upload-done";
        announce(file.name + " uploaded");
        if (grid) fetchHtml(url + "/tile").then(placeTile).catch(function () {});
      }
      function answered(xhr) {
        /* A refusal for now (429, 503) waits and goes again; any other is final. */
        var body = {};
        try { body = JSON.parse(xhr.responseText); } catch (e) { body = {}; }
        var message = (body.error && body.error.message) || ("HTTP " + xhr.status);
        if (xhr.status === 429 || xhr.status === 503) {
          later(retryAfter(xhr), xhr.status === 429 ? "the server is busy with your other uploads" : "the server is not ready");
          return;
        }
        li.className = "upload-failed";
        state.textContent = "refused: " + message;
        announce(file.name + " was refused: " + message);
      }
      function dropped() {
        drops += 1;
        if (drops >= MAX_DROPS) {
          li.className = "upload-failed";
          state.textContent = "failed: the connection dropped " + drops + " times; add the file again";
          announce(file.name + " failed");
          return;
        }
        later(Math.min(60, 5 * drops), "the connection dropped");
      }
      function progress(from) {
        return function (e) {
          if (!e.lengthComputable) return;
          bar.value = Math.round(((from + e.loaded) / file.size) * 100);
          state.textContent = bar.value + "%";
        };
      }
      /* A large file goes by the tus protocol in pieces: after a drop it goes on from the
       * last byte the server has (HEAD), not from the start. */
      var where = null;
      function tus(method, url, headers, body, onDone, onProgress) {
        var xhr = new XMLHttpRequest();
        xhr.open(method, url);
        xhr.setRequestHeader("Tus-Resumable", "1.0.0");
        xhr.setRequestHeader("X-CSRF-Token", csrf);
        Object.keys(headers).forEach(function (k) { xhr.setRequestHeader(k, headers[k]); });
        if (onProgress) xhr.upload.onprogress = onProgress;
        xhr.onload = function () { onDone(xhr); };
        xhr.onerror = function () { onDone(null); };
        xhr.send(body);
      }
      function b64(text) { return btoa(unescape(encodeURIComponent(text))); }
      function piece(offset) {
        var end = Math.min(file.size, offset + RESUMABLE_PIECE);
        tus("PATCH", where, { "Content-Type": "application/offset+octet-stream", "Upload-Offset": String(offset) },
          file.slice(offset, end), function (xhr) {
            if (!xhr) { finish(); dropped(); return; }
            var at = parseInt(xhr.getResponseHeader("Upload-Offset"), 10);
            if (xhr.status === 204) {
              var result = xhr.getResponseHeader("Conveyor-Result");
              if (result) { finish(); uploaded(result); return; }
              piece(at);
              return;
            }
            if (xhr.status === 409 && at >= 0) {
              /* Another piece of this upload is still arriving: wait as asked, then go on
               * from where the server is (its next answer says, if this one is stale). */
              var wait = parseInt(xhr.getResponseHeader("Retry-After"), 10);
              if (wait > 0) { setTimeout(function () { piece(at); }, wait * 1000); return; }
              piece(at);
              return;
            }
            finish(); answered(xhr);
          }, progress(offset));
      }
      function resumable() {
        if (where) {
          tus("HEAD", where, {}, null, function (xhr) {
            if (!xhr) { finish(); dropped(); return; }
            if (xhr.status === 200) { piece(parseInt(xhr.getResponseHeader("Upload-Offset"), 10)); return; }
            where = null;  /* gone (finished or removed): begin again */
            resumable();
          });
          return;
        }
        var meta = [["filename", file.name], ["target", zone.dataset.resumableTarget]].concat(fields);
        tus("POST", "/uploads", {
          "Upload-Length": String(file.size),
          "Upload-Metadata": meta.map(function (m) { return m[0] + " " + b64(m[1]); }).join(",")
        }, null, function (xhr) {
          if (!xhr) { finish(); dropped(); return; }
          if (xhr.status === 201) { where = xhr.getResponseHeader("Location"); piece(0); return; }
          finish(); answered(xhr);
        });
      }
      function start() {
        li.className = "upload-sending";
        state.textContent = "0%";
        if (file.size >= RESUMABLE_FROM && zone.dataset.resumableTarget) { resumable(); return; }
        var xhr = new XMLHttpRequest();
        xhr.open("POST", zone.dataset.uploadUrl);
        xhr.setRequestHeader("X-CSRF-Token", csrf);
        xhr.setRequestHeader("Accept", "application/json");
        xhr.upload.onprogress = progress(0);
        xhr.onload = function () {
          finish();
          if (xhr.status === 201) {
            var body = {};
            try { body = JSON.parse(xhr.responseText); } catch (e) { body = {}; }
            uploaded(body.url);
          } else {
            answered(xhr);
          }
        };
        xhr.onerror = function () { finish(); bar.value = 0; dropped(); };
        var form = new FormData();
        /* Text parts first: the server streams the file part to storage as it arrives. */
        fields.forEach(function (f) { form.append(f[0], f[1]); });
        form.append("file", file, file.name);
        xhr.send(form);
      }
      uploadQueue.push(start);
    }
    function sendAll(files) { Array.prototype.forEach.call(files, add); pumpUploads(); }
    input.addEventListener("change", function () { sendAll(input.files); input.value = ""; });
    zone.addEventListener("dragover", function (e) { e.preventDefault(); zone.classList.add("over"); });
    zone.addEventListener("dragleave", function () { zone.classList.remove("over"); });
    zone.addEventListener("drop", function (e) { e.preventDefault(); zone.classList.remove("over"); sendAll(e.dataTransfer.files); });
  });

  /* The transcript: choose a line (or a word) to play from there; the line and the word being
   * said are marked. The lines may arrive after the page (swapped in live), so both look them
   * up when needed. */
  var player = document.getElementById("player");
  /* Opened from a search hit (?t=seconds): the player starts where the words are said, and
   * that line is shown and focused. */
  var startAt = player ? parseFloat(new URLSearchParams(location.search).get("t")) : NaN;
  if (player && startAt >= 0) {
    var seek = function () { player.currentTime = startAt; };
    if (player.readyState >= 1) seek(); else player.addEventListener("loadedmetadata", seek, { once: true });
    var line = Array.prototype.find.call(document.querySelectorAll("#transcript .seg"), function (b) {
      return Math.abs(parseFloat(b.dataset.start) - startAt) < 0.01;
    });
    if (line) { line.classList.add("current"); line.scrollIntoView({ block: "center" }); line.focus(); }
  }
  if (player) {
    document.addEventListener("click", function (e) {
      var b = e.target.closest ? e.target.closest("#transcript .word, #transcript .seg") : null;
      if (!b) return;
      player.currentTime = parseFloat(b.dataset.start);
      player.play().catch(function () {});
    });
    var mark = function () {
      var t = player.currentTime;
      document.querySelectorAll("#transcript .seg").forEach(function (b) {
        var on = t >= parseFloat(b.dataset.start) && t < parseFloat(b.dataset.end);
        b.classList.toggle("current", on);
        if (on) b.setAttribute("aria-current", "true"); else b.removeAttribute("aria-current");
      });
      document.querySelectorAll("#transcript .word").forEach(function (w) {
        w.classList.toggle("said", t >= parseFloat(w.dataset.start) && t < parseFloat(w.dataset.end));
      });
    };
    player.addEventListener("timeupdate", mark);
    player.addEventListener("seeked", mark);
  }
})();
