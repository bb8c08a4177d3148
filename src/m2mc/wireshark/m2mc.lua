-- m2mc.lua: Wireshark dissectors for m2mc (docs/wireshark.md).
--
--   m2mp        M2MP packets over UDP (docs/interfaces.md §1, docs/m2mp.md): message id,
--               last flag, fragment number, payload; the fragments of one message are
--               reassembled and the message handed on.
--   m2mc        M2MC group messages (src/m2mc/group/codec.py, docs/group.md): every kind.
--   m2mc_auth   the authentication header of keyed groups and deployments
--               (src/m2mc/security/auth.py): sender, counter, suite, tag. A body under
--               HMAC-SHA256 is in clear and decoded; under an AEAD suite it is encrypted
--               and shown as such.
--   m2mc_infra  infrastructure-mode frames (src/m2mc/infra/codec.py, wire.py): cell
--               downlink and uplink over UDP, and backbone frames.
--   m2mc_backbone the backbone's TCP stream: 4-byte big-endian length, then a frame; the
--               first frame of a connection names the sending host.
--
-- Install: `m2mc wireshark install` copies this file into Wireshark's personal Lua
-- plugin folder. Or run it once: tshark -X lua_script:m2mc.lua -r capture.pcapng
--
-- Finding the traffic: group messages and infrastructure frames are recognised on any
-- UDP port (and backbone streams on any TCP port) by strict heuristics; plain M2MP
-- messages carry no magic, so their UDP ports are a preference (m2mp.udp_ports,
-- default 7777, the default channel's port), or use Decode As.
--
-- Written for Lua 5.2 to 5.4 (Wireshark 3.6 and later): no native bitwise operators.

local DISSECTOR_VERSION = "0.1.0"  -- the m2mc release it belongs to

if set_plugin_info then  -- Wireshark 3.6 and later: shown by `tshark -G plugins`
    set_plugin_info({ version = DISSECTOR_VERSION,
                      description = "m2mc: M2MP packets, group messages, infrastructure mode",
                      repository = "docs/wireshark.md of m2mc" })
end

---------------------------------------------------------------------------- bit operations
local bitlib = bit32 or bit
if not bitlib then
    -- a Lua 5.3 or 5.4 build without bit32 or bit: its native operators, compiled only
    -- there (Lua 5.2 could not parse them)
    bitlib = load([[
        local function i(x) return math.tointeger(x) or math.floor(x) end
        return {
            band = function(a, b) return i(a) & i(b) end,
            bor = function(a, b) return i(a) | i(b) end,
            bxor = function(a, b) return i(a) ~ i(b) end,
            lshift = function(a, n) return (i(a) << n) & 0xFFFFFFFF end,
            rshift = function(a, n) return (i(a) & 0xFFFFFFFF) >> n end,
        }]])()
end
local TWO32 = 4294967296
local band, bor, bxor, lshift, rshift
if bit32 or not bit then
    band, bor, bxor = bitlib.band, bitlib.bor, bitlib.bxor
    lshift, rshift = bitlib.lshift, bitlib.rshift
else  -- LuaBitOp returns signed results: bring them back to 0 .. 2^32-1
    band = function(a, b) return bitlib.band(a, b) % TWO32 end
    bor = function(a, b) return bitlib.bor(a, b) % TWO32 end
    bxor = function(a, b) return bitlib.bxor(a, b) % TWO32 end
    lshift = function(a, n) return bitlib.lshift(a, n) % TWO32 end
    rshift = function(a, n) return bitlib.rshift(a, n) % TWO32 end
end

local function dec(v)
    if type(v) == "number" then return string.format("%d", v) end
    return tostring(v)
end

local function hex8(v)  -- Python's f"{v:08x}" of a Lua number or a UInt64
    if type(v) == "number" then return string.format("%08x", v) end
    local text = v:tohex(16):lower():gsub("^0+", "")
    return string.rep("0", 8 - #text) .. text
end

local function num(v)  -- a Lua number from a number or a (huge) UInt64
    return type(v) == "number" and v or tonumber(tostring(v))
end

local function u64(v)  -- a ProtoField.uint64 value from a Lua number or a UInt64
    if type(v) == "number" then
        return UInt64.new(v % TWO32, math.floor(v / TWO32))
    end
    return v
end

---------------------------------------------------------------------------- wire constants
-- Kept in step with the Python sources by tests/wireshark/test_schema.py.
local M2MP_HEADER = 8
local M2MP_MAX_FRAGMENT = 500
local M2MP_MAX_DATAGRAM = 65507 -- the largest packet, at a packet size a user named (packet=)
local GROUP_MAGIC = "MC"
local GROUP_VERSION = 1
local GROUP_HEADER = 13
local GROUP_FLAG_AUTH = 1
local INFRA_MAGIC = "IM\1"
local INFRA_SEALED_MAGIC = "IM\129"
local INFRA_PIECE_MAGIC = "IM\2"  -- a piece of a frame larger than the cell's MTU
local INFRA_PIECE_HEADER = 9
local INFRA_HEADER = 7
local AUTH_VERSION = 1
local AUTH_TAG_SIZE = 16
local MAX_SENDER = 64
local MAX_RECEIVER = 64
local MAX_PEER_NAME = 64
local MAX_BACKBONE_FRAME = 64 * 1024 * 1024
local MAX_NAME = 128           -- bytes of UTF-8 in a display name
local MAX_BODY_ELEMENTS = 16   -- elements of an extensible body (and of a GRPS_INFO entry)

local AUTH_SUITES = {
    [1] = "hmac-sha256",
    [2] = "aes-256-gcm",
    [3] = "chacha20-poly1305",
}

-- Group message kinds (m2mc.group.codec.Kind): name, then the body's array fields in
-- order as "name:type"; a name with a dot is a field of a nested value flattened on
-- the wire; a type ending in "?" may be nil. Fields after "/" are optional trailing
-- elements: absent means "none" (the sender has no display name, say). A spec ending
-- in "..." takes further elements after its own, a newer version's additions, up to
-- MAX_BODY_ELEMENTS in all: shown and ignored, as the codec ignores them. Every other
-- body has exactly its fields.
local GROUP_KINDS = {
    [1]  = { "DATA",      "sender:pid records:records" },
    [2]  = { "REPAIR",    "sender:pid records:records" },
    [3]  = { "ORDER",     "sender:pid epoch:uint stamps:entries commit:uint" },
    [4]  = { "STATUS",    "sender:pid own_hw:uint summary:summary members:members sequencer:logstate? max_gseq:uint / name:name ..." },
    [5]  = { "NACK",      "sender:pid ranges:digest gseqs:intervals" },
    [6]  = { "SYNC_REQ",  "sender:pid sync_seqno:uint digest:digest" },
    [7]  = { "SYNC_RESP", "sender:pid requester:pid sync_seqno:uint records:records remaining:uint" },
    [8]  = { "JOIN",      "sender:pid version:uint order:str desc:str / name:name ..." },
    [9]  = { "LEAVE",     "sender:pid version:uint" },
    [10] = { "HANDOVER",  "sender:pid sequencer.epoch:uint sequencer.pid:pid sequencer.next_gseq:uint" },
    [11] = { "ACK",       "sender:pid epoch:uint leader:pid high:uint synced:bool" },
    [12] = { "PREPARE",   "sender:pid epoch:uint commit:uint" },
    [13] = { "PROMISE",   "sender:pid epoch:uint candidate:pid log_epoch:uint log_leader:str commit:uint high:uint entries:entries" },
    [14] = { "START",     "sender:pid epoch:uint base:uint entries:entries" },
    [15] = { "DECIDED",   "sender:pid entries:entries" },
    [16] = { "GONE",      "sender:pid ranges:digest gseqs:intervals stubs:records" },
    [17] = { "STREAM",    "sender:pid pid:pid seq:uint index:uint chunk_bytes:uint data:bin state:uint size:uint sha256:bin" },
    [18] = { "STREAM_NACK", "sender:pid pid:pid seq:uint chunks:intervals" },
    [19] = { "STREAM_ACK", "sender:pid pid:pid seq:uint next:uint" },
    [20] = { "ADV",       "sender:pid" },
    [21] = { "GRPS_INFO", "sender:pid groups:grpinfos" },
}

-- A group entry of GRPS_INFO (m2mc.group.codec.GrpInfo), in the same notation; "names"
-- is a map pid -> display name of the group's current members that have one.
local GROUP_INFO = "gid:str desc:str order:str members:members / keyed:bool names:names ..."

-- Infrastructure-mode messages (m2mc.infra.codec._SCHEMAS): class name, link, fields.
local INFRA_TAGS = {
    [1]  = { "Beacon",         "downlink", "host:str high:int uplink:str master:str directory:cells sequence:int" },
    [2]  = { "Normals",        "downlink", "host:str records:records" },
    [3]  = { "Transfer",       "downlink", "host:str dest:mid records:records" },
    [4]  = { "Ack",            "downlink", "host:str node:str rseq:int" },
    [5]  = { "Move",           "downlink", "host:str node:str target:cell" },
    [6]  = { "NotMember",      "downlink", "host:str mid:mid" },
    [7]  = { "HistoryReply",   "downlink", "host:str dest:mid req:int lo:int hi:int floor:int records:records members:strs" },
    [10] = { "Hello",          "uplink",   "node:str host:str mid:opt_mid mystable:int member:bool" },
    [11] = { "JoinReq",        "uplink",   "node:str host:str rseq:int mid:mid groups:strs" },
    [12] = { "NewReq",         "uplink",   "node:str host:str rseq:int mid:mid items:items" },
    [13] = { "LeaveReq",       "uplink",   "node:str host:str rseq:int mid:mid" },
    [14] = { "LeaveOkReq",     "uplink",   "node:str host:str rseq:int mid:mid" },
    [15] = { "NackReq",        "uplink",   "node:str host:str rseq:int mid:mid s1:int s2:int" },
    [16] = { "HistoryReq",     "uplink",   "node:str host:str mid:mid req:int groups:strs lo:int hi:int newest:bool" },
    [20] = { "Status",         "backbone", "host:str incarnation:int address:str port:int cell:str uplink:str load:int local_m:mids master:str epoch:epoch log_epoch:epoch commit:int high:int eid:opt_epoch" },
    [21] = { "ElectStart",     "backbone", "eid:epoch" },
    [22] = { "Vote",           "backbone", "eid:epoch voter:str candidate:str" },
    [23] = { "Takeover",       "backbone", "epoch:epoch master:str commit:int low:int" },
    [24] = { "TakeoverReject", "backbone", "epoch:epoch host:str promised:epoch" },
    [25] = { "StateReply",     "backbone", "epoch:epoch host:str log_epoch:epoch commit:int high:int snapshot:opt_snapshot records:records older:records" },
    [26] = { "Forward",        "backbone", "host:str fseq:int request:request" },
    [27] = { "FwdAck",         "backbone", "epoch:epoch fseq:int upto:int" },
    [28] = { "StabInfo",       "backbone", "host:str pairs:pairs" },
    [29] = { "Subscribe",      "backbone", "host:str" },
    [30] = { "Unsubscribe",    "backbone", "host:str" },
    [31] = { "Fetch",          "backbone", "host:str lo:int hi:int" },
    [32] = { "Fetched",        "backbone", "records:records" },
    [33] = { "Replicate",      "backbone", "epoch:epoch commit:int records:records" },
    [34] = { "Sync",           "backbone", "epoch:epoch commit:int base:int snapshot:opt_snapshot records:records" },
    [35] = { "Accepted",       "backbone", "epoch:epoch host:str high:int gap:bool" },
    [36] = { "Commit",         "backbone", "epoch:epoch commit:int stable:int replicas:strs" },
    [37] = { "Reroute",        "backbone", "epoch:epoch count:int target:cell" },
    [38] = { "AdminRequest",   "backbone", "client:str request:int op:int target:str" },
    [39] = { "Reconfig",       "backbone", "host:str client:str request:int op:int target:str" },
    [40] = { "AdminResult",    "backbone", "host:str client:str request:int code:str text:str lsn:int" },
    [41] = { "RetiredNotice",  "backbone", "host:str target:str lsn:int" },
    [42] = { "Recover",        "backbone", "host:str nonce:int" },
    [43] = { "RecoverReply",   "backbone", "host:str nonce:int epoch:epoch pristine:bool retired:strs config_lsn:int" },
    [44] = { "HistoryAsk",     "backbone", "host:str node:str mid:mid req:int groups:strs lo:int hi:int newest:bool" },
    [45] = { "HistoryAnswer",  "backbone", "host:str node:str dest:mid req:int lo:int hi:int floor:int records:records members:strs" },
}

-- Kinds of the coordinator's log records (m2mc.infra.messages).
local INFRA_RECORD_KINDS = {
    [0] = "APP",
    [1] = "JOINED",
    [2] = "LEFT",
    [3] = "EXPELLED",
    [4] = "CLEANUP",
    [5] = "RETIRED",
    [6] = "ADMITTED",
    [7] = "GENESIS",
    [8] = "GJOINED",
    [9] = "GLEFT",
    [10] = "NOOP",
}

-- Record kinds whose member id names a host (its node), not a member.
local INFRA_HOST_RECORDS = {
    [5] = "RETIRED",
    [6] = "ADMITTED",
    [7] = "GENESIS",
}

-- An operator's request (AdminRequest.op, Reconfig.op; m2mc.infra.messages.OP_*).
local ADMIN_OPS = {
    [0] = "show",
    [1] = "retire",
    [2] = "readmit",
}

-- The fields of a spec in order; out.required: how many an element list must have,
-- out.max: how many it may have (more than #out when the spec ends in "...").
local function parse_spec(spec)
    local out, trailing = {}, false
    for word in spec:gmatch("%S+") do
        if word == "/" then
            trailing = true
        elseif word == "..." then
            out.open = true
        else
            local name, kind = word:match("^([%w_%.]+):([%w_]+%??)$")
            if not name then error("bad field spec: " .. word) end
            local optional = kind:sub(-1) == "?"
            out[#out + 1] = { name = name, kind = optional and kind:sub(1, -2) or kind,
                              optional = optional, trailing = trailing }
            if not trailing then out.required = #out end
        end
    end
    out.required = out.required or 0
    out.max = out.open and MAX_BODY_ELEMENTS or #out
    return out
end

local function names_of(table_, index)
    local out = {}
    for k, v in pairs(table_) do out[k] = v[index] end
    return out
end

local function label_of(name)
    local text = name:gsub("[_%.]", " ")
    return text:sub(1, 1):upper() .. text:sub(2)
end

---------------------------------------------------------------------------- protocols
local p_m2mp = Proto("m2mp", "M2MP packet (m2mc)")
local p_m2mc = Proto("m2mc", "M2MC group message")
local p_auth = Proto("m2mc_auth", "m2mc authentication header")
local p_infra = Proto("m2mc_infra", "m2mc infrastructure-mode frame")
local p_backbone = Proto("m2mc_backbone", "m2mc backbone stream")

local F = {}  -- every field, by a short key

-- M2MP
F.msgid = ProtoField.uint32("m2mp.msgid", "Message ID", base.HEX)
F.last = ProtoField.bool("m2mp.last", "Last packet", 32, nil, 0x80000000)
F.fragment = ProtoField.uint32("m2mp.fragment", "Fragment number", base.DEC, nil, 0x7fffffff)
F.payload = ProtoField.bytes("m2mp.payload", "Fragment")
F.payload_len = ProtoField.uint16("m2mp.payload_len", "Fragment length")
F.message = ProtoField.bytes("m2mp.message", "Reassembled message")
F.message_len = ProtoField.uint32("m2mp.message_len", "Message length")
F.fragments = ProtoField.uint32("m2mp.fragments", "Fragments")
F.fragment_in = ProtoField.framenum("m2mp.fragment_in", "Fragment in frame")
F.reassembled_in = ProtoField.framenum("m2mp.reassembled_in", "Reassembled in frame")
F.copy_of = ProtoField.framenum("m2mp.copy_of", "Redundant copy of frame")
p_m2mp.fields = { F.msgid, F.last, F.fragment, F.payload, F.payload_len, F.message,
                  F.message_len, F.fragments, F.fragment_in, F.reassembled_in, F.copy_of }

-- Group frame header and the nested values of group bodies
local KIND_NAMES = names_of(GROUP_KINDS, 1)
F.magic = ProtoField.string("m2mc.magic", "Magic")
F.version = ProtoField.uint8("m2mc.version", "Version")
F.tag = ProtoField.bytes("m2mc.tag", "Group tag")
F.group = ProtoField.string("m2mc.group", "Group")
F.kind = ProtoField.uint8("m2mc.kind", "Kind", base.DEC, KIND_NAMES)
F.flags = ProtoField.uint8("m2mc.flags", "Flags", base.HEX)
F.flag_auth = ProtoField.bool("m2mc.flags.auth", "Authenticated", 8, nil, GROUP_FLAG_AUTH)
F.record = ProtoField.none("m2mc.record", "Record")
F.record_mid = ProtoField.string("m2mc.record.mid", "Message")
F.record_pid = ProtoField.string("m2mc.record.pid", "Sender")
F.record_seq = ProtoField.uint64("m2mc.record.seq", "Seqno")
F.record_parent = ProtoField.string("m2mc.record.parent", "Parent")
F.record_gseq = ProtoField.uint64("m2mc.record.gseq", "Global seqno")
F.record_payload = ProtoField.bytes("m2mc.record.payload", "Payload")
F.record_payload_len = ProtoField.uint32("m2mc.record.payload_len", "Payload length")
F.record_vclock = ProtoField.none("m2mc.record.vclock", "Vector clock")
F.vclock_pid = ProtoField.string("m2mc.vclock.pid", "Process")
F.vclock_count = ProtoField.uint64("m2mc.vclock.count", "Count")
F.entry = ProtoField.none("m2mc.entry", "Log entry")
F.entry_position = ProtoField.uint64("m2mc.entry.position", "Position")
F.entry_mid = ProtoField.string("m2mc.entry.mid", "Message")
F.entry_member = ProtoField.string("m2mc.entry.member", "Member")
F.entry_version = ProtoField.uint64("m2mc.entry.version", "Version")
F.entry_joined = ProtoField.bool("m2mc.entry.joined", "Joined")
F.digest_pid = ProtoField.string("m2mc.digest.pid", "Sender")
F.digest_interval = ProtoField.string("m2mc.digest.interval", "Seqnos")
F.interval = ProtoField.string("m2mc.interval", "Interval")
F.summary_pid = ProtoField.string("m2mc.summary.pid", "Sender")
F.summary_hw = ProtoField.uint64("m2mc.summary.hw", "High-water")
F.member = ProtoField.none("m2mc.member", "Member")
F.member_pid = ProtoField.string("m2mc.member.pid", "Process")
F.member_version = ProtoField.uint64("m2mc.member.version", "Version")
F.member_joined = ProtoField.bool("m2mc.member.joined", "Joined")
F.logstate_epoch = ProtoField.uint64("m2mc.logstate.epoch", "Promised epoch")
F.logstate_leader = ProtoField.string("m2mc.logstate.leader", "Promised leader")
F.logstate_log_epoch = ProtoField.uint64("m2mc.logstate.log_epoch", "Log epoch")
F.logstate_log_leader = ProtoField.string("m2mc.logstate.log_leader", "Log leader")
F.logstate_high = ProtoField.uint64("m2mc.logstate.high", "Log high")
F.grp = ProtoField.none("m2mc.grp", "Group info")
F.grp_gid = ProtoField.string("m2mc.grp.gid", "Group id")
F.grp_tag = ProtoField.string("m2mc.grp.tag", "Group tag")
F.grp_desc = ProtoField.string("m2mc.grp.desc", "Description")
F.grp_order = ProtoField.string("m2mc.grp.order", "Order")
F.grp_keyed = ProtoField.bool("m2mc.grp.keyed", "Keyed")
F.grp_members = ProtoField.none("m2mc.grp.members", "Members")
F.grp_names = ProtoField.none("m2mc.grp.names", "Names")
F.grp_names_pid = ProtoField.string("m2mc.grp.names.pid", "Process")
F.grp_names_name = ProtoField.string("m2mc.grp.names.name", "Name")
F.ignored = ProtoField.bytes("m2mc.ignored", "Element of a newer version")
F.body = ProtoField.none("m2mc.body", "Body")
local group_fields = {
    F.magic, F.version, F.tag, F.group, F.kind, F.flags, F.flag_auth, F.record, F.record_mid,
    F.record_pid, F.record_seq, F.record_parent, F.record_gseq, F.record_payload,
    F.record_payload_len, F.record_vclock, F.vclock_pid, F.vclock_count, F.entry,
    F.entry_position, F.entry_mid, F.entry_member, F.entry_version, F.entry_joined,
    F.digest_pid, F.digest_interval, F.interval, F.summary_pid, F.summary_hw, F.member,
    F.member_pid, F.member_version, F.member_joined, F.logstate_epoch, F.logstate_leader,
    F.logstate_log_epoch, F.logstate_log_leader, F.logstate_high, F.grp, F.grp_gid, F.grp_tag,
    F.grp_desc, F.grp_order, F.grp_keyed, F.grp_members, F.grp_names, F.grp_names_pid,
    F.grp_names_name, F.ignored, F.body,
}

-- One field per body field name, its type from the schema ("m2mc.<name>"); a type
-- missing here is a subtree ("none"). A field name has one type in Wireshark, so where
-- two messages use a name for different things: a cell ("target" of Move and Reroute)
-- is valued with its host, like the host id "target" of the operators' messages; and
-- Forward's member request ("request", false: no field of its own) is a subtree found
-- by m2mc_infra.request.tag, m2mc_infra.request being the operators' request number.
local GROUP_FT = { pid = "string", str = "string", name = "string", uint = "uint64",
                   bool = "bool", bin = "bytes" }
local INFRA_FT = { int = "uint64", str = "string", bool = "bool", bytes = "bytes",
                   mid = "string", opt_mid = "string", epoch = "string", opt_epoch = "string",
                   strs = "string", cell = "string", request = false }

local function make_field(prefix, name, ft)
    local abbrev = prefix .. "." .. name
    local label = label_of(name)
    if ft == "string" then return ProtoField.string(abbrev, label) end
    if ft == "uint64" then return ProtoField.uint64(abbrev, label) end
    if ft == "bool" then return ProtoField.bool(abbrev, label) end
    if ft == "bytes" then return ProtoField.bytes(abbrev, label) end
    return ProtoField.none(abbrev, label)
end

local function body_fields(prefix, schemas, spec_index, types, into)
    local made, ft_of = {}, {}
    for _, schema in pairs(schemas) do
        schema.fields = parse_spec(schema[spec_index])
        for _, f in ipairs(schema.fields) do
            local ft = types[f.kind]
            if ft == nil then ft = "none" end
            if ft == false then  -- no field: the renderer adds a subtree of its own
                f.no_field = true
            elseif ft_of[f.name] and ft_of[f.name] ~= ft then
                error(prefix .. "." .. f.name .. " has two types: " .. ft_of[f.name] .. ", " .. ft)
            elseif not made[f.name] then
                ft_of[f.name] = ft
                made[f.name] = make_field(prefix, f.name, ft)
                into[#into + 1] = made[f.name]
            end
        end
    end
    return made
end

local GF = body_fields("m2mc", GROUP_KINDS, 2, GROUP_FT, group_fields)
local GROUP_INFO_FIELDS = parse_spec(GROUP_INFO)
p_m2mc.fields = group_fields

-- Authentication header
F.auth_version = ProtoField.uint8("m2mc_auth.version", "Version")
F.auth_suite = ProtoField.uint8("m2mc_auth.suite", "Suite", base.DEC, AUTH_SUITES)
F.auth_key_id = ProtoField.uint8("m2mc_auth.key_id", "Key id")
F.auth_sender_len = ProtoField.uint8("m2mc_auth.sender_len", "Sender length")
F.auth_sender = ProtoField.string("m2mc_auth.sender", "Sender")
F.auth_counter = ProtoField.uint64("m2mc_auth.counter", "Counter")
F.auth_encrypted = ProtoField.bool("m2mc_auth.encrypted", "Encrypted")
F.auth_ciphertext = ProtoField.bytes("m2mc_auth.ciphertext", "Encrypted body")
F.auth_tag = ProtoField.bytes("m2mc_auth.tag", "Authentication tag")
p_auth.fields = { F.auth_version, F.auth_suite, F.auth_key_id, F.auth_sender_len,
                  F.auth_sender, F.auth_counter, F.auth_encrypted, F.auth_ciphertext,
                  F.auth_tag }

-- Infrastructure-mode frames
local INFRA_NAMES = names_of(INFRA_TAGS, 1)
F.i_magic = ProtoField.bytes("m2mc_infra.magic", "Magic")
F.i_sealed = ProtoField.bool("m2mc_infra.sealed", "Sealed")
F.i_crc = ProtoField.uint32("m2mc_infra.crc", "CRC-32", base.HEX)
F.i_crc_ok = ProtoField.bool("m2mc_infra.crc.ok", "CRC-32 correct")
F.i_receiver = ProtoField.string("m2mc_infra.receiver", "Receiver")
F.i_tag = ProtoField.uint8("m2mc_infra.tag", "Message", base.DEC, INFRA_NAMES)
F.i_link = ProtoField.string("m2mc_infra.link", "Link")
F.i_member_id = ProtoField.string("m2mc_infra.member_id", "Member id")
F.i_member_node = ProtoField.string("m2mc_infra.member.node", "Node")
F.i_member_join = ProtoField.uint64("m2mc_infra.member.join_id", "Join id", base.HEX)
F.i_epoch_round = ProtoField.uint64("m2mc_infra.epoch.round", "Round")
F.i_epoch_time = ProtoField.double("m2mc_infra.epoch.time", "Starter's time")
F.i_epoch_starter = ProtoField.string("m2mc_infra.epoch.starter", "Starter")
F.i_record = ProtoField.none("m2mc_infra.record", "Record")
F.i_rec_lsn = ProtoField.uint64("m2mc_infra.record.lsn", "Log position")
F.i_rec_gseq = ProtoField.uint64("m2mc_infra.record.gseq", "Global seqno")
F.i_rec_kind = ProtoField.uint8("m2mc_infra.record.kind", "Kind", base.DEC, INFRA_RECORD_KINDS)
F.i_rec_mid = ProtoField.string("m2mc_infra.record.mid", "Member id")
F.i_rec_nseq = ProtoField.uint64("m2mc_infra.record.nseq", "NEW number")
F.i_rec_app_seq = ProtoField.uint64("m2mc_infra.record.app_seq", "Application seqno")
F.i_rec_app_mid = ProtoField.string("m2mc_infra.record.app_mid", "Message")
F.i_rec_host = ProtoField.string("m2mc_infra.record.host", "Host")
F.i_rec_prememb = ProtoField.uint64("m2mc_infra.record.prememb", "Membership changes before")
F.i_rec_body = ProtoField.bytes("m2mc_infra.record.body", "Body")
F.i_rec_body_len = ProtoField.uint32("m2mc_infra.record.body_len", "Body length")
F.i_rec_group = ProtoField.string("m2mc_infra.record.group", "Group")
F.i_rec_gpos = ProtoField.uint64("m2mc_infra.record.gpos", "Messages of its group up to it")
F.i_item = ProtoField.none("m2mc_infra.item", "NEW item")
F.i_item_nseq = ProtoField.uint64("m2mc_infra.item.nseq", "NEW number")
F.i_item_app_seq = ProtoField.uint64("m2mc_infra.item.app_seq", "Application seqno")
F.i_item_app_mid = ProtoField.string("m2mc_infra.item.app_mid", "Message")
F.i_item_body = ProtoField.bytes("m2mc_infra.item.body", "Body")
F.i_item_body_len = ProtoField.uint32("m2mc_infra.item.body_len", "Body length")
F.i_item_group = ProtoField.string("m2mc_infra.item.group", "Group")
F.i_item_kind = ProtoField.uint8("m2mc_infra.item.kind", "Kind", base.DEC, INFRA_RECORD_KINDS)
F.i_cellinfo = ProtoField.none("m2mc_infra.cellinfo", "Cell")
F.i_cell_host = ProtoField.string("m2mc_infra.cellinfo.host", "Host")
F.i_cell_cell = ProtoField.string("m2mc_infra.cellinfo.cell", "Cell channel")
F.i_cell_uplink = ProtoField.string("m2mc_infra.cellinfo.uplink", "Uplink")
F.i_cell_load = ProtoField.uint64("m2mc_infra.cellinfo.load", "Load")
F.i_pair_stable = ProtoField.uint64("m2mc_infra.pair.stable", "Stable")
F.i_snap_lsn = ProtoField.uint64("m2mc_infra.snapshot.lsn", "Log position")
F.i_snap_gseq = ProtoField.uint64("m2mc_infra.snapshot.gseq", "Global seqno")
F.i_snap_last_app = ProtoField.uint64("m2mc_infra.snapshot.last_app_gseq", "Last application gseq")
F.i_snap_retired = ProtoField.string("m2mc_infra.snapshot.retired", "Retired host")
F.i_snap_config_lsn = ProtoField.uint64("m2mc_infra.snapshot.config_lsn", "Configuration log position")
F.i_snap_sequence = ProtoField.uint64("m2mc_infra.snapshot.sequence", "Sequence id", base.HEX)
F.i_row = ProtoField.none("m2mc_infra.row", "Row")
F.i_row_first = ProtoField.uint64("m2mc_infra.row.first", "First")
F.i_row_last = ProtoField.uint64("m2mc_infra.row.last", "Last")
F.i_row_recv = ProtoField.uint64("m2mc_infra.row.recv", "Received")
F.i_row_member = ProtoField.bool("m2mc_infra.row.member", "Member")
F.i_row_app_seq = ProtoField.uint64("m2mc_infra.row.app_seq", "Application seqno of NEW recv")
F.i_grow = ProtoField.none("m2mc_infra.group_row", "Group")
F.i_grow_name = ProtoField.string("m2mc_infra.group_row.name", "Name")
F.i_grow_count = ProtoField.uint64("m2mc_infra.group_row.count", "Messages")
F.i_grow_member = ProtoField.string("m2mc_infra.group_row.member", "Member")
F.i_request_tag = ProtoField.uint8("m2mc_infra.request.tag", "Request", base.DEC, INFRA_NAMES)
F.i_peer = ProtoField.string("m2mc_backbone.peer", "Peer host")
F.i_length = ProtoField.uint32("m2mc_backbone.length", "Frame length")
F.i_piece_frame = ProtoField.uint32("m2mc_infra.piece.frame", "Frame id", base.HEX)
F.i_piece_index = ProtoField.uint8("m2mc_infra.piece.index", "Piece (from 0)")
F.i_piece_count = ProtoField.uint8("m2mc_infra.piece.count", "Pieces of the frame")
F.i_piece_in = ProtoField.framenum("m2mc_infra.piece.put_together_in", "Frame put together in")
F.i_piece_of = ProtoField.framenum("m2mc_infra.piece.part", "Piece in")
local infra_fields = {
    F.i_piece_frame, F.i_piece_index, F.i_piece_count, F.i_piece_in, F.i_piece_of,
    F.i_magic, F.i_sealed, F.i_crc, F.i_crc_ok, F.i_receiver, F.i_tag, F.i_link,
    F.i_member_id, F.i_member_node, F.i_member_join, F.i_epoch_round, F.i_epoch_time,
    F.i_epoch_starter, F.i_record, F.i_rec_lsn, F.i_rec_gseq, F.i_rec_kind, F.i_rec_mid,
    F.i_rec_nseq, F.i_rec_app_seq, F.i_rec_app_mid, F.i_rec_host, F.i_rec_prememb,
    F.i_rec_body, F.i_rec_body_len, F.i_item, F.i_item_nseq, F.i_item_app_seq,
    F.i_item_app_mid, F.i_item_body, F.i_item_body_len, F.i_cellinfo, F.i_cell_host,
    F.i_cell_cell, F.i_cell_uplink, F.i_cell_load, F.i_pair_stable, F.i_snap_lsn,
    F.i_snap_gseq, F.i_snap_last_app, F.i_snap_retired, F.i_snap_config_lsn,
    F.i_snap_sequence, F.i_row,
    F.i_row_first, F.i_row_last, F.i_row_recv, F.i_row_member, F.i_request_tag,
    F.i_rec_group, F.i_rec_gpos, F.i_item_group, F.i_item_kind, F.i_row_app_seq, F.i_grow,
    F.i_grow_name, F.i_grow_count, F.i_grow_member,
}
local IF = body_fields("m2mc_infra", INFRA_TAGS, 3, INFRA_FT, infra_fields)
p_infra.fields = infra_fields
p_backbone.fields = { F.i_peer, F.i_length }

-- Expert information
local E = {
    malformed = ProtoExpert.new("m2mc.malformed", "Malformed m2mc message",
                                expert.group.MALFORMED, expert.severity.ERROR),
    unknown = ProtoExpert.new("m2mc.unknown_kind", "Unknown message kind (newer m2mc?)",
                              expert.group.PROTOCOL, expert.severity.WARN),
    bad_crc = ProtoExpert.new("m2mc_infra.bad_crc", "CRC-32 does not match: corrupted frame",
                              expert.group.CHECKSUM, expert.severity.ERROR),
    bad_packet = ProtoExpert.new("m2mp.bad_packet", "Not an M2MP packet",
                                 expert.group.MALFORMED, expert.severity.ERROR),
    incomplete = ProtoExpert.new("m2mp.incomplete", "Fragment of a message not complete in the capture",
                                 expert.group.REASSEMBLE, expert.severity.NOTE),
    copy = ProtoExpert.new("m2mp.copy", "Redundant copy",
                           expert.group.SEQUENCE, expert.severity.CHAT),
    newer = ProtoExpert.new("m2mc.newer", "Elements of a newer version, ignored",
                            expert.group.UNDECODED, expert.severity.NOTE),
    keyed_names = ProtoExpert.new("m2mc.keyed_names",
                                  "Names in a keyed group's entry (never sent; ignored)",
                                  expert.group.PROTOCOL, expert.severity.WARN),
}
p_m2mc.experts = { E.malformed, E.unknown, E.newer, E.keyed_names }
p_infra.experts = { E.bad_crc }
p_m2mp.experts = { E.bad_packet, E.incomplete, E.copy }

---------------------------------------------------------------------------- preferences
p_m2mp.prefs.udp_ports = Pref.range("UDP ports", "7777",
    "UDP ports whose datagrams are all M2MP packets (plain M2MP messages carry no magic; "
    .. "group messages are found on any port by the heuristic)", 65535)
p_m2mc.prefs.group_names = Pref.string("Group ids", "",
    "Comma-separated group ids, shown instead of their tags (ids announced in GRPS_INFO "
    .. "messages in the capture are learned)")
p_infra.prefs.udp_ports = Pref.range("Cell UDP ports", "",
    "UDP ports of cells and uplinks (frames are also found on any port by the heuristic)", 65535)
p_backbone.prefs.tcp_ports = Pref.range("Backbone TCP ports", "",
    "TCP ports of host backbones (streams are also found on any port by the heuristic)", 65535)

---------------------------------------------------------------------------- text
-- Text from the wire as valid UTF-8: each byte that does not start a well-formed
-- sequence becomes U+FFFD, so labels and exports never carry broken text.
local REPLACEMENT = "\239\191\189"

local function utf8_text(s)
    if not s:find("[\128-\255]") then return s end
    local out, i, n = {}, 1, #s
    while i <= n do
        local c = s:byte(i)
        local size = c < 0x80 and 1 or (c >= 0xC2 and c <= 0xDF) and 2
            or (c >= 0xE0 and c <= 0xEF) and 3 or (c >= 0xF0 and c <= 0xF4) and 4 or 0
        local ok = size > 0 and i + size - 1 <= n
        if ok and size > 1 then
            local second = s:byte(i + 1)
            local low = (c == 0xE0 and 0xA0) or (c == 0xF0 and 0x90) or 0x80
            local high = (c == 0xED and 0x9F) or (c == 0xF4 and 0x8F) or 0xBF
            ok = second >= low and second <= high
            for j = i + 2, i + size - 1 do
                local d = s:byte(j)
                if d < 0x80 or d > 0xBF then ok = false end
            end
        end
        if ok then
            out[#out + 1] = s:sub(i, i + size - 1)
            i = i + size
        else
            out[#out + 1] = REPLACEMENT
            i = i + 1
        end
    end
    return table.concat(out)
end

local function text_at(tvb, off, len)
    return len > 0 and utf8_text(tvb:raw(off, len)) or ""
end

---------------------------------------------------------------------------- msgpack
-- A value: {t = type, off, len, v = value | items = {...} | keys, vals, boff, blen}.
local MAX_DEPTH = 32

local function mp_read(tvb, off, stop, depth)
    if off >= stop then return nil, "truncated msgpack value" end
    if depth > MAX_DEPTH then return nil, "msgpack nested too deep" end
    local b = tvb(off, 1):uint()
    local node = { off = off }
    local hdr, count, slen, blen
    if b <= 0x7f then
        node.t, node.v, node.len = "int", b, 1
        return node
    elseif b >= 0xe0 then
        node.t, node.v, node.len = "int", b - 256, 1
        return node
    elseif b >= 0xa0 and b <= 0xbf then
        hdr, slen = 1, b - 0xa0
    elseif b >= 0x90 and b <= 0x9f then
        hdr, count, node.t = 1, b - 0x90, "arr"
    elseif b >= 0x80 and b <= 0x8f then
        hdr, count, node.t = 1, b - 0x80, "map"
    elseif b == 0xc0 then
        node.t, node.len = "nil", 1
        return node
    elseif b == 0xc2 or b == 0xc3 then
        node.t, node.v, node.len = "bool", b == 0xc3, 1
        return node
    else
        local sizes = { [0xc4] = 1, [0xc5] = 2, [0xc6] = 4, [0xca] = 4, [0xcb] = 8, [0xcc] = 1,
                        [0xcd] = 2, [0xce] = 4, [0xcf] = 8, [0xd0] = 1, [0xd1] = 2, [0xd2] = 4,
                        [0xd3] = 8, [0xd9] = 1, [0xda] = 2, [0xdb] = 4, [0xdc] = 2, [0xdd] = 4,
                        [0xde] = 2, [0xdf] = 4 }
        local size = sizes[b]
        if size == nil then return nil, string.format("msgpack type 0x%02x is not used by m2mc", b) end
        if off + 1 + size > stop then return nil, "truncated msgpack value" end
        local r = tvb(off + 1, size)
        if b == 0xca or b == 0xcb then
            node.t, node.v, node.len = "float", r:float(), 1 + size
            return node
        elseif b >= 0xcc and b <= 0xcf then
            local v
            if size == 8 then
                local hi, lo = tvb(off + 1, 4):uint(), tvb(off + 5, 4):uint()
                v = hi < 2097152 and hi * TWO32 + lo or UInt64.new(lo, hi)
            else
                v = r:uint()
            end
            node.t, node.v, node.len = "int", v, 1 + size
            return node
        elseif b >= 0xd0 and b <= 0xd3 then
            -- signed: m2mc never writes one; as a Lua number (a negative one is refused)
            local v = size == 8 and tvb(off + 1, 4):int() * TWO32 + tvb(off + 5, 4):uint()
                or r:int()
            node.t, node.v, node.len = "int", v, 1 + size
            return node
        end
        local n = size == 8 and 0 or r:uint()
        hdr = 1 + size
        if b <= 0xc6 then blen = n
        elseif b <= 0xdb then slen = n
        elseif b <= 0xdd then count, node.t = n, "arr"
        else count, node.t = n, "map" end
    end
    local pos = off + hdr
    if slen or blen then
        local n = slen or blen
        if pos + n > stop then return nil, "truncated msgpack string" end
        if slen then
            node.t, node.v = "str", text_at(tvb, pos, n)
        else
            node.t = "bin"
        end
        node.boff, node.blen, node.len = pos, n, hdr + n
        return node
    end
    -- every element takes at least one byte: a count beyond the bytes left is a lie
    if count * (node.t == "map" and 2 or 1) > stop - pos then
        return nil, "msgpack array longer than its message"
    end
    if node.t == "arr" then
        node.items = {}
        for i = 1, count do
            local item, err = mp_read(tvb, pos, stop, depth + 1)
            if not item then return nil, err end
            node.items[i] = item
            pos = pos + item.len
        end
    else
        node.keys, node.vals = {}, {}
        for i = 1, count do
            local k, err = mp_read(tvb, pos, stop, depth + 1)
            if not k then return nil, err end
            pos = pos + k.len
            local v, err2 = mp_read(tvb, pos, stop, depth + 1)
            if not v then return nil, err2 end
            pos = pos + v.len
            node.keys[i], node.vals[i] = k, v
        end
    end
    node.len = pos - off
    return node
end

---------------------------------------------------------------------------- CRC-32
local CRC_TABLE = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if c % 2 == 1 then c = bxor(rshift(c, 1), 0xEDB88320) else c = rshift(c, 1) end
    end
    CRC_TABLE[i] = c
end

local function raw_from(tvb, off)  -- the bytes from off to the end ("" when none)
    local n = tvb:len()
    return n > off and tvb:raw(off, n - off) or ""
end

local function crc32(s)
    local c = 0xFFFFFFFF
    for i = 1, #s do
        c = bxor(CRC_TABLE[bxor(band(c, 0xFF), s:byte(i))], rshift(c, 8))
    end
    return bxor(c, 0xFFFFFFFF)
end

---------------------------------------------------------------------------- BLAKE2b-64
-- The group tag of a group id (m2mc.group.codec.group_tag), to show group names.
-- 64-bit words are kept as two 32-bit halves.
local B2_IV = { 0x6a09e667, 0xf3bcc908, 0xbb67ae85, 0x84caa73b, 0x3c6ef372, 0xfe94f82b,
                0xa54ff53a, 0x5f1d36f1, 0x510e527f, 0xade682d1, 0x9b05688c, 0x2b3e6c1f,
                0x1f83d9ab, 0xfb41bd6b, 0x5be0cd19, 0x137e2179 }
local B2_SIGMA = {
    { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
    { 14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3 },
    { 11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4 },
    { 7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8 },
    { 9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13 },
    { 2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9 },
    { 12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11 },
    { 13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10 },
    { 6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5 },
    { 10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0 },
}

local function b2_compress(hh, hl, block, t, last)
    local vh, vl, mh, ml = {}, {}, {}, {}
    for i = 1, 8 do
        vh[i], vl[i] = hh[i], hl[i]
        vh[i + 8], vl[i + 8] = B2_IV[2 * i - 1], B2_IV[2 * i]
    end
    vl[13] = bxor(vl[13], t % TWO32)
    vh[13] = bxor(vh[13], math.floor(t / TWO32))
    if last then vh[15], vl[15] = bxor(vh[15], 0xFFFFFFFF), bxor(vl[15], 0xFFFFFFFF) end
    for j = 0, 15 do
        local b1, b2, b3, b4, b5, b6, b7, b8 = block:byte(8 * j + 1, 8 * j + 8)
        ml[j] = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
        mh[j] = b5 + b6 * 256 + b7 * 65536 + b8 * 16777216
    end
    local function add(ah, al, bh, bl)
        local l = al + bl
        local h = ah + bh
        if l >= TWO32 then l, h = l - TWO32, h + 1 end
        return h % TWO32, l
    end
    local function g(a, b, c, d, x, y)
        local ah, al = add(vh[a], vl[a], vh[b], vl[b])
        ah, al = add(ah, al, mh[x], ml[x])
        local dh, dl = bxor(vl[d], al), bxor(vh[d], ah)  -- rotate right 32: swap halves
        local ch, cl = add(vh[c], vl[c], dh, dl)
        local xh, xl = bxor(vh[b], ch), bxor(vl[b], cl)
        local bh = bor(rshift(xh, 24), lshift(xl, 8))
        local bl = bor(rshift(xl, 24), lshift(xh, 8))
        ah, al = add(ah, al, bh, bl)
        ah, al = add(ah, al, mh[y], ml[y])
        xh, xl = bxor(dh, ah), bxor(dl, al)
        dh, dl = bor(rshift(xh, 16), lshift(xl, 16)), bor(rshift(xl, 16), lshift(xh, 16))
        ch, cl = add(ch, cl, dh, dl)
        xh, xl = bxor(bh, ch), bxor(bl, cl)
        bh, bl = bor(lshift(xh, 1), rshift(xl, 31)), bor(lshift(xl, 1), rshift(xh, 31))
        vh[a], vl[a], vh[b], vl[b], vh[c], vl[c], vh[d], vl[d] = ah, al, bh, bl, ch, cl, dh, dl
    end
    for r = 0, 11 do
        local s = B2_SIGMA[r % 10 + 1]
        g(1, 5, 9, 13, s[1], s[2]); g(2, 6, 10, 14, s[3], s[4])
        g(3, 7, 11, 15, s[5], s[6]); g(4, 8, 12, 16, s[7], s[8])
        g(1, 6, 11, 16, s[9], s[10]); g(2, 7, 12, 13, s[11], s[12])
        g(3, 8, 9, 14, s[13], s[14]); g(4, 5, 10, 15, s[15], s[16])
    end
    for i = 1, 8 do
        hh[i] = bxor(hh[i], bxor(vh[i], vh[i + 8]))
        hl[i] = bxor(hl[i], bxor(vl[i], vl[i + 8]))
    end
end

local function blake2b_64(data)  -- hex of the 8-byte digest
    local hh, hl = {}, {}
    for i = 1, 8 do hh[i], hl[i] = B2_IV[2 * i - 1], B2_IV[2 * i] end
    hl[1] = bxor(hl[1], 0x01010008)  -- no key, 8-byte digest
    local n, off = #data, 0
    while n - off > 128 do
        b2_compress(hh, hl, data:sub(off + 1, off + 128), off + 128, false)
        off = off + 128
    end
    local rest = data:sub(off + 1)
    b2_compress(hh, hl, rest .. string.rep("\0", 128 - #rest), n, true)
    local out = {}
    for _, w in ipairs({ hl[1], hh[1] }) do
        for _ = 1, 4 do
            out[#out + 1] = string.format("%02x", w % 256)
            w = math.floor(w / 256)
        end
    end
    return table.concat(out)
end

local DISCOVERY_TAG = "0000000000000000"

local function group_tag_hex(gid)
    local tag = blake2b_64(gid)
    if tag == DISCOVERY_TAG then return "0000000000000001" end
    return tag
end

---------------------------------------------------------------------------- group names
local learned_names = {}  -- tag hex -> group id, from GRPS_INFO in this capture
local pref_names = {}     -- tag hex -> group id, from the preference
local pref_names_text = nil

local function refresh_pref_names()
    local text = p_m2mc.prefs.group_names or ""
    if text == pref_names_text then return end
    pref_names_text, pref_names = text, {}
    for gid in text:gmatch("[^,]+") do
        gid = gid:match("^%s*(.-)%s*$")
        if gid ~= "" then pref_names[group_tag_hex(gid)] = gid end
    end
end

local function group_name(tag_hex)
    if tag_hex == DISCOVERY_TAG then return "(discovery)" end
    refresh_pref_names()
    return pref_names[tag_hex] or learned_names[tag_hex]
end

---------------------------------------------------------------------------- rendering
-- ctx: {tvb, pinfo, bad = {...}, info = {...}}; a renderer adds items and notes faults.
local function range_of(ctx, node) return ctx.tvb(node.off, node.len) end

local function bad(ctx, item, text)
    item:add_proto_expert_info(E.malformed, text)
    ctx.faults = (ctx.faults or 0) + 1
end

local function expect(ctx, tree, node, t, what)
    if node and node.t == t and (t ~= "int" or type(node.v) ~= "number" or node.v >= 0) then
        return true
    end
    bad(ctx, node and tree:add(range_of(ctx, node), "?") or tree,
        "expected " .. what .. ", got " .. (node and node.t or "nothing"))
    return false
end

local function span(ctx, first, last)
    return ctx.tvb(first.off, last.off + last.len - first.off)
end

local function add_uint(tree, field, ctx, node)
    return tree:add(field, range_of(ctx, node), u64(node.v))
end

local function intervals_text(ctx, tree, node, field)
    if not expect(ctx, tree, node, "arr", "a list of intervals") then return "" end
    local items, parts = node.items, {}
    if #items % 2 == 1 then bad(ctx, tree, "odd interval list") end
    for i = 1, #items - 1, 2 do
        local lo, hi = items[i], items[i + 1]
        if expect(ctx, tree, lo, "int", "a seqno") and expect(ctx, tree, hi, "int", "a seqno") then
            local text = dec(lo.v) .. "-" .. dec(hi.v)
            tree:add(field, span(ctx, lo, hi), text)
            parts[#parts + 1] = text
        end
    end
    return table.concat(parts, ",")
end

local GR = {}  -- group body renderers: (ctx, tree, node, field, name) -> info text or nil

-- Numbers that name something: the name is shown after the number.
local NUMBER_NAMES = { op = ADMIN_OPS }

function GR.uint(ctx, tree, node, field, name)
    if expect(ctx, tree, node, "int", "an integer") then
        local item = add_uint(tree, field, ctx, node)
        local names = NUMBER_NAMES[name]
        local known = names and names[node.v]
        if names then item:append_text(" (" .. (known or "unknown") .. ")") end
        return known or dec(node.v)
    end
end

function GR.pid(ctx, tree, node, field)
    if expect(ctx, tree, node, "str", "a string") then
        tree:add(field, range_of(ctx, node), node.v)
        return node.v
    end
end
GR.str = GR.pid

-- Bytes (a stream chunk's data, its body's SHA-256): their length in the info column.
function GR.bin(ctx, tree, node, field, name)
    if expect(ctx, tree, node, "bin", "bytes") then
        local item = tree:add(field, ctx.tvb(node.boff, node.blen))  -- the bytes themselves
        item:set_text(label_of(name) .. ": " .. node.blen .. (node.blen == 1 and " byte" or " bytes"))
        return node.blen .. " bytes"
    end
end

function GR.bool(ctx, tree, node, field)
    if expect(ctx, tree, node, "bool", "a boolean") then
        tree:add(field, range_of(ctx, node), node.v)
        return tostring(node.v)
    end
end

-- A display name is at most MAX_NAME bytes of valid UTF-8, or the codec refuses the
-- whole message (m2mc.group.wire_bounds.read_name).
local function check_name(ctx, item, node)
    if node.blen > MAX_NAME then
        bad(ctx, item, "a display name has at most " .. MAX_NAME .. " bytes, this one "
            .. node.blen)
    elseif node.blen > 0 and ctx.tvb:raw(node.boff, node.blen) ~= node.v then
        bad(ctx, item, "a display name is UTF-8 text")
    end
end

-- The sender's own name (JOIN, STATUS): shown after the sender in the info column.
function GR.name(ctx, tree, node, field)
    if expect(ctx, tree, node, "str", "a display name") then
        check_name(ctx, tree:add(field, range_of(ctx, node), node.v), node)
        ctx.name = node.v
    end
end

-- Elements after the last one this version knows (from index first on): a newer
-- version's additions, which the codec ignores. Shown, noted, never malformed.
local MP_TYPES = { int = "integer", float = "float", str = "string", bin = "bytes",
                   arr = "array", map = "map", ["nil"] = "nil", bool = "boolean" }

local function newer_elements(ctx, tree, items, first)
    for i = first, #items do
        local n = items[i].len
        tree:add(F.ignored, range_of(ctx, items[i])):set_text(
            "Element " .. i .. " (a newer version's, ignored): " .. MP_TYPES[items[i].t] .. ", "
            .. n .. (n == 1 and " byte" or " bytes"))
    end
    local count = #items - first + 1
    tree:add_proto_expert_info(E.newer, count .. (count == 1 and " element" or " elements")
                               .. " after the " .. (first - 1) .. " this version knows: "
                               .. "a newer version's, ignored")
end

local function group_record(ctx, tree, r, what)
    if not expect(ctx, tree, r, "arr", "a data record") then return end
    local it = r.items
    local t = tree:add(F.record, range_of(ctx, r))
    if #it < 5 or #it > 7 then
        t:set_text("Record (" .. #it .. " fields)")
        bad(ctx, t, "a data record has 5 to 7 fields")
        return
    end
    local ok = expect(ctx, t, it[1], "str", "a process id") and expect(ctx, t, it[2], "int", "a seqno")
        and expect(ctx, t, it[3], "str", "a parent process id")
        and expect(ctx, t, it[4], "int", "a parent seqno") and expect(ctx, t, it[5], "bin", "a payload")
    if not ok then return end
    local mid = it[1].v .. ":" .. dec(it[2].v)
    local parent = (it[3].v == "" and it[4].v == 0) and "" or it[3].v .. ":" .. dec(it[4].v)
    local text = what .. " " .. mid .. ", parent " .. (parent == "" and "OTR" or parent) .. ", "
        .. it[5].blen .. " bytes"
    t:add(F.record_mid, span(ctx, it[1], it[2]), mid)
    t:add(F.record_pid, range_of(ctx, it[1]), it[1].v)
    add_uint(t, F.record_seq, ctx, it[2])
    t:add(F.record_parent, span(ctx, it[3], it[4]), parent,
          "Parent: " .. (parent == "" and "OTR (the ordering-tree root)" or parent))
    t:add(F.record_payload_len, range_of(ctx, it[5]), it[5].blen)
    if it[5].blen > 0 then t:add(F.record_payload, ctx.tvb(it[5].boff, it[5].blen)) end
    if #it >= 6 and it[6].t ~= "nil" and expect(ctx, t, it[6], "int", "a gseq") then
        add_uint(t, F.record_gseq, ctx, it[6])
        text = text .. ", gseq " .. dec(it[6].v)
    end
    if #it == 7 and expect(ctx, t, it[7], "map", "a vector clock") then
        local vc = t:add(F.record_vclock, range_of(ctx, it[7]))
        local parts = {}
        for i, k in ipairs(it[7].keys) do
            local v = it[7].vals[i]
            if expect(ctx, vc, k, "str", "a process id") and expect(ctx, vc, v, "int", "a count") then
                vc:add(F.vclock_pid, range_of(ctx, k), k.v)
                add_uint(vc, F.vclock_count, ctx, v)
                parts[#parts + 1] = k.v .. "=" .. dec(v.v)
            end
        end
        vc:set_text("Vector clock: {" .. table.concat(parts, ", ") .. "}")
    end
    t:set_text(text)
    ctx.mids[#ctx.mids + 1] = mid
end

function GR.records(ctx, tree, node, field, name)
    if not expect(ctx, tree, node, "arr", "a list of records") then return end
    local t = tree:add(field, range_of(ctx, node))
    t:set_text(label_of(name) .. " (" .. #node.items .. ")")
    local before = #ctx.mids
    -- a GONE's stubs are records without their payload (docs/group.md section 8)
    local what = name == "stubs" and "Stub" or "Record"
    for _, r in ipairs(node.items) do group_record(ctx, t, r, what) end
    local mids = {}
    for i = before + 1, #ctx.mids do mids[#mids + 1] = ctx.mids[i] end
    return #mids .. " [" .. table.concat(mids, " ") .. "]"
end

function GR.entries(ctx, tree, node, field, name)
    if not expect(ctx, tree, node, "arr", "a list of log entries") then return end
    local t = tree:add(field, range_of(ctx, node))
    t:set_text(label_of(name) .. " (" .. #node.items .. ")")
    local parts = {}
    for _, e in ipairs(node.items) do
        if expect(ctx, t, e, "arr", "a log entry") then
            local it = e.items
            local et = t:add(F.entry, range_of(ctx, e))
            if (#it == 3 or #it == 4) and expect(ctx, et, it[1], "int", "a position")
                    and expect(ctx, et, it[2], "str", "a process id")
                    and expect(ctx, et, it[3], "int", "a seqno or version") then
                add_uint(et, F.entry_position, ctx, it[1])
                local text
                if #it == 3 then
                    text = it[2].v .. ":" .. dec(it[3].v)
                    et:add(F.entry_mid, span(ctx, it[2], it[3]), text)
                elseif expect(ctx, et, it[4], "bool", "a joined flag") then
                    et:add(F.entry_member, range_of(ctx, it[2]), it[2].v)
                    add_uint(et, F.entry_version, ctx, it[3])
                    et:add(F.entry_joined, range_of(ctx, it[4]), it[4].v)
                    text = "member " .. it[2].v .. " v" .. dec(it[3].v)
                        .. (it[4].v and " joins" or " leaves")
                end
                if text then
                    et:set_text("Entry " .. dec(it[1].v) .. ": " .. text)
                    parts[#parts + 1] = dec(it[1].v) .. "=" .. text
                end
            else
                bad(ctx, et, "a log entry has 3 or 4 fields")
            end
        end
    end
    return "[" .. table.concat(parts, " ") .. "]"
end

function GR.digest(ctx, tree, node, field, name)
    if not expect(ctx, tree, node, "map", "a digest") then return end
    local t = tree:add(field, range_of(ctx, node))
    local parts = {}
    for i, k in ipairs(node.keys) do
        local v = node.vals[i]
        if expect(ctx, t, k, "str", "a process id") then
            local pt = t:add(F.digest_pid, range_of(ctx, k), k.v)
            local text = intervals_text(ctx, pt, v, F.digest_interval)
            pt:set_text(k.v .. ": " .. text)
            parts[#parts + 1] = k.v .. ":" .. text
        end
    end
    local text = table.concat(parts, " ")
    t:set_text(label_of(name) .. ": " .. text)
    return "{" .. text .. "}"
end

function GR.intervals(ctx, tree, node, field, name)
    local t = tree:add(field, range_of(ctx, node))
    local text = intervals_text(ctx, t, node, F.interval)
    t:set_text(label_of(name) .. ": " .. text)
    return "[" .. text .. "]"
end

function GR.summary(ctx, tree, node, field, name)
    if not expect(ctx, tree, node, "map", "a summary") then return end
    local t = tree:add(field, range_of(ctx, node))
    local parts = {}
    for i, k in ipairs(node.keys) do
        local v = node.vals[i]
        if expect(ctx, t, k, "str", "a process id") and expect(ctx, t, v, "int", "a seqno") then
            local st = t:add(F.summary_pid, span(ctx, k, v), k.v)
            add_uint(st, F.summary_hw, ctx, v)
            st:set_text(k.v .. ": " .. dec(v.v))
            parts[#parts + 1] = k.v .. "=" .. dec(v.v)
        end
    end
    t:set_text(label_of(name) .. ": " .. table.concat(parts, " "))
    return "{" .. table.concat(parts, " ") .. "}"
end

-- The member entries under t; returns their texts and, per entry, {pid, item, index}.
local function members_into(ctx, t, node)
    local parts, rows = {}, {}
    for _, m in ipairs(node.items) do
        if expect(ctx, t, m, "arr", "a member entry") then
            local it = m.items
            local mt = t:add(F.member, range_of(ctx, m))
            if #it == 3 and expect(ctx, mt, it[1], "str", "a process id")
                    and expect(ctx, mt, it[2], "int", "a version")
                    and expect(ctx, mt, it[3], "bool", "a joined flag") then
                mt:add(F.member_pid, range_of(ctx, it[1]), it[1].v)
                add_uint(mt, F.member_version, ctx, it[2])
                mt:add(F.member_joined, range_of(ctx, it[3]), it[3].v)
                local text = it[1].v .. " v" .. dec(it[2].v) .. (it[3].v and " joined" or " left")
                mt:set_text("Member " .. text)
                parts[#parts + 1] = text
                rows[#rows + 1] = { pid = it[1].v, item = mt, index = #parts }
            else
                bad(ctx, mt, "a member entry has 3 fields")
            end
        end
    end
    return parts, rows
end

function GR.members(ctx, tree, node, field, name)
    if not expect(ctx, tree, node, "arr", "a member list") then return end
    local t = tree:add(field, range_of(ctx, node))
    local parts = members_into(ctx, t, node)
    t:set_text(label_of(name) .. " (" .. #parts .. ")")
    return dec(#parts)
end

function GR.logstate(ctx, tree, node, field, name)
    local t = tree:add(field, range_of(ctx, node))
    if node.t == "nil" then
        t:set_text(label_of(name) .. ": none")
        return
    end
    if not expect(ctx, t, node, "arr", "a log state") then return end
    local it = node.items
    if #it ~= 5 then
        bad(ctx, t, "a log state has 5 fields")
        return
    end
    local fs = { F.logstate_epoch, F.logstate_leader, F.logstate_log_epoch, F.logstate_log_leader,
                 F.logstate_high }
    local types = { "int", "str", "int", "str", "int" }
    for i = 1, 5 do
        if expect(ctx, t, it[i], types[i], types[i] == "int" and "an integer" or "a string") then
            if types[i] == "int" then add_uint(t, fs[i], ctx, it[i])
            else t:add(fs[i], range_of(ctx, it[i]), it[i].v) end
        end
    end
    if it[1].t == "int" and it[2].t == "str" and it[5].t == "int" then
        t:set_text(label_of(name) .. ": ballot (" .. dec(it[1].v) .. ", " .. it[2].v
                   .. "), log to " .. dec(it[5].v))
    end
end

-- The names of a GRPS_INFO entry ({pid: name}) under gt; returns them by pid.
local function names_into(ctx, gt, node)
    local named = {}
    if not expect(ctx, gt, node, "map", "a map of names") then return named, 0 end
    local t = gt:add(F.grp_names, range_of(ctx, node))
    local parts = {}
    for i, k in ipairs(node.keys) do
        local v = node.vals[i]
        if expect(ctx, t, k, "str", "a process id")
                and expect(ctx, t, v, "str", "a display name") then
            local pt = t:add(F.grp_names_pid, span(ctx, k, v), k.v)
            check_name(ctx, pt:add(F.grp_names_name, range_of(ctx, v), v.v), v)
            pt:set_text(k.v .. ": " .. v.v)
            named[k.v] = v.v
            parts[#parts + 1] = k.v .. "=" .. v.v
        end
    end
    t:set_text("Names (" .. #parts .. "): " .. table.concat(parts, ", "))
    return named, #parts
end

function GR.grpinfos(ctx, tree, node, field, name)
    if not expect(ctx, tree, node, "arr", "a list of groups") then return end
    local t = tree:add(field, range_of(ctx, node))
    t:set_text(label_of(name) .. " (" .. #node.items .. ")")
    local gids = {}
    local spec = GROUP_INFO_FIELDS
    for _, g in ipairs(node.items) do
        if expect(ctx, t, g, "arr", "a group info") then
            local it = g.items
            local gt = t:add(F.grp, range_of(ctx, g))
            if #it >= spec.required and #it <= spec.max
                    and expect(ctx, gt, it[1], "str", "a group id")
                    and expect(ctx, gt, it[2], "str", "a description")
                    and expect(ctx, gt, it[3], "str", "an order")
                    and expect(ctx, gt, it[4], "arr", "a member list") then
                local gid = it[1].v
                local tag = group_tag_hex(gid)
                if not ctx.pinfo.visited then learned_names[tag] = gid end
                gt:add(F.grp_gid, range_of(ctx, it[1]), gid)
                gt:add(F.grp_tag, range_of(ctx, it[1]), tag):set_generated()
                gt:add(F.grp_desc, range_of(ctx, it[2]), it[2].v)
                gt:add(F.grp_order, range_of(ctx, it[3]), it[3].v)
                local mt = gt:add(F.grp_members, range_of(ctx, it[4]))
                local parts, rows = members_into(ctx, mt, it[4])
                local keyed, named, count = false, {}, 0
                if #it >= 5 and expect(ctx, gt, it[5], "bool", "a keyed flag") then
                    keyed = it[5].v
                    gt:add(F.grp_keyed, range_of(ctx, it[5]), keyed)
                end
                if #it >= 6 then
                    named, count = names_into(ctx, gt, it[6])
                    if keyed then  -- a keyed group's names travel sealed only
                        gt:add_proto_expert_info(E.keyed_names, "names in a keyed group's entry: "
                                                 .. "m2mc never sends them, receivers ignore them")
                    end
                end
                for _, row in ipairs(rows) do
                    local who = named[row.pid]
                    if who and who ~= "" then
                        row.item:append_text(" (" .. who .. ")")
                        parts[row.index] = parts[row.index] .. " (" .. who .. ")"
                    end
                end
                mt:set_text("Members: " .. table.concat(parts, ", "))
                if #it > #spec then newer_elements(ctx, gt, it, #spec + 1) end
                gt:set_text("Group " .. gid .. " (" .. it[3].v .. ", " .. #parts .. " members"
                            .. (count > 0 and ", " .. count .. " named" or "")
                            .. (keyed and ", keyed" or "") .. ")")
                gids[#gids + 1] = gid
            else
                bad(ctx, gt, "a group info has " .. spec.required .. " to " .. spec.max
                    .. " fields, this one " .. #it)
            end
        end
    end
    return "[" .. table.concat(gids, " ") .. "]"
end

-- Render an array body against a schema's fields; returns the info text.
local function render_fields(ctx, tree, node, fields, renderers, made)
    local items = node.items
    if #items < fields.required or #items > fields.max then
        bad(ctx, tree, "expected " .. (fields.required == fields.max and fields.max or
                                       fields.required .. " to " .. fields.max)
            .. " fields, got " .. #items)
    end
    local info = {}
    for i, f in ipairs(fields) do
        local item = items[i]
        if item == nil then break end
        local text
        if f.optional and item.t == "nil" and f.kind ~= "logstate" then
            tree:add(made[f.name], range_of(ctx, item)):set_text(label_of(f.name) .. ": none")
        else
            local field = made[f.name]
            if f.no_field then field = nil end
            text = renderers[f.kind](ctx, tree, item, field, f.name)
        end
        if text and f.name ~= "sender" then info[#info + 1] = f.name .. "=" .. text end
    end
    if #items > #fields and #items <= fields.max then
        newer_elements(ctx, tree, items, #fields + 1)
    end
    return table.concat(info, " ")
end

-- Run a dissection step; a fault in this script shows as a malformed-packet error on
-- the packet instead of losing the whole dissection.
local function safely(tree, fn, ...)
    local ok, result = pcall(fn, ...)
    if ok then return result end
    tree:add_proto_expert_info(E.malformed, "m2mc dissector fault: " .. tostring(result))
    return "m2mc dissector fault"
end

---------------------------------------------------------------------------- authentication
-- The auth header at ``off`` of a sealed message; returns (body offset, body length,
-- suite, sender) or nil when it does not fit.
local function dissect_auth(tvb, off, tree, pinfo)
    local n = tvb:len()
    if n < off + 4 then return nil end
    local t = tree:add(p_auth, tvb(off, n - off))
    local suite = tvb(off + 1, 1):uint()
    local slen = tvb(off + 3, 1):uint()
    t:add(F.auth_version, tvb(off, 1))
    t:add(F.auth_suite, tvb(off + 1, 1))
    t:add(F.auth_key_id, tvb(off + 2, 1))
    t:add(F.auth_sender_len, tvb(off + 3, 1))
    local body = off + 4 + slen + 8
    if slen < 1 or slen > MAX_SENDER or n < body + AUTH_TAG_SIZE then
        t:add_proto_expert_info(E.malformed, "truncated authentication header")
        return nil
    end
    local sender = text_at(tvb, off + 4, slen)
    t:add(F.auth_sender, tvb(off + 4, slen), sender)
    t:add(F.auth_counter, tvb(off + 4 + slen, 8))
    local blen = n - body - AUTH_TAG_SIZE
    local encrypted = suite ~= 1
    t:add(F.auth_encrypted, tvb(off + 1, 1), encrypted):set_generated()
    if encrypted and blen > 0 then
        t:add(F.auth_ciphertext, tvb(body, blen)):append_text(
            " (" .. (AUTH_SUITES[suite] or "unknown suite") .. ": not decoded)")
    end
    t:add(F.auth_tag, tvb(n - AUTH_TAG_SIZE, AUTH_TAG_SIZE)):append_text(
        " (not verified: the dissector holds no key)")
    t:set_text("Authentication: " .. (AUTH_SUITES[suite] or ("suite " .. suite)) .. ", sender "
               .. sender .. ", counter " .. tostring(tvb(off + 4 + slen, 8):uint64()))
    return body, blen, suite, sender
end

---------------------------------------------------------------------------- group messages
local function dissect_group(tvb, pinfo, tree)
    local n = tvb:len()
    pinfo.cols.protocol = "M2MC"
    local t = tree:add(p_m2mc, tvb())
    if n < GROUP_HEADER then
        t:add_proto_expert_info(E.malformed, "shorter than the 13-byte group header")
        return "M2MC (truncated)"
    end
    t:add(F.magic, tvb(0, 2))
    t:add(F.version, tvb(2, 1))
    local tag_hex = tostring(tvb(3, 8):bytes()):lower()
    t:add(F.tag, tvb(3, 8))
    local name = group_name(tag_hex)
    if name then t:add(F.group, tvb(3, 8), name):set_generated() end
    local kind = tvb(11, 1):uint()
    local kind_item = t:add(F.kind, tvb(11, 1))
    local flags = tvb(12, 1):uint()
    local ft = t:add(F.flags, tvb(12, 1))
    ft:add(F.flag_auth, tvb(12, 1))
    local schema = GROUP_KINDS[kind]
    local kname = schema and schema[1] or ("kind " .. kind)
    local where = name or tag_hex
    t:set_text("M2MC " .. kname .. ", group " .. where)
    if tvb(0, 2):string() ~= GROUP_MAGIC or tvb(2, 1):uint() ~= GROUP_VERSION then
        t:add_proto_expert_info(E.malformed, "not a version-1 group message")
        return "M2MC (bad magic or version)"
    end
    if not schema then
        kind_item:add_proto_expert_info(E.unknown, "unknown group message kind " .. kind)
    end
    local body_off, body_len = GROUP_HEADER, n - GROUP_HEADER
    local sender
    if band(flags, GROUP_FLAG_AUTH) ~= 0 then
        local suite
        body_off, body_len, suite, sender = dissect_auth(tvb, GROUP_HEADER, t, pinfo)
        if not body_off then return "M2MC " .. kname .. " (truncated authentication)" end
        if suite ~= 1 then
            return "M2MC " .. kname .. " " .. where .. " from " .. sender .. " (encrypted)"
        end
    elseif flags ~= 0 then
        ft:add_proto_expert_info(E.malformed, string.format("unknown flags 0x%02x", flags))
    end
    if not schema then return "M2MC unknown kind " .. kind end
    local ctx = { tvb = tvb, pinfo = pinfo, mids = {} }
    local node, err = mp_read(tvb, body_off, body_off + body_len, 0)
    local bt = t:add(F.body, tvb(body_off, body_len))
    bt:set_text("Body (" .. body_len .. " bytes)")
    if not node then
        bad(ctx, bt, "body: " .. err)
        return "M2MC " .. kname .. " (malformed body)"
    end
    if node.len ~= body_len then bad(ctx, bt, "bytes after the body") end
    if not expect(ctx, bt, node, "arr", "a body array") then return "M2MC " .. kname end
    local info = render_fields(ctx, bt, node, schema.fields, GR, GF)
    local from = node.items[1] and node.items[1].t == "str" and node.items[1].v or "?"
    if sender and sender ~= from then
        bt:add_proto_expert_info(E.malformed, "sealed by " .. sender .. " but names " .. from)
    end
    if ctx.name and ctx.name ~= "" then from = from .. " (" .. ctx.name .. ")" end
    return "M2MC " .. kname .. " " .. where .. " from " .. from .. (info ~= "" and " " .. info or "")
end

---------------------------------------------------------------------------- infrastructure
local IR = {}  -- infra body renderers

local function member_id(ctx, tree, node, field, label)
    if not expect(ctx, tree, node, "arr", "a member id") then return end
    local it = node.items
    if #it ~= 2 or not expect(ctx, tree, it[1], "str", "a node") or not expect(ctx, tree, it[2], "int", "a join id") then
        bad(ctx, tree, "a member id is [node, join id]")
        return
    end
    local text = it[1].v .. "#" .. hex8(it[2].v)
    local t = tree:add(field, range_of(ctx, node), text)
    if label then t:set_text(label .. ": " .. text) end
    t:add(F.i_member_node, range_of(ctx, it[1]), it[1].v)
    t:add(F.i_member_join, range_of(ctx, it[2]), u64(it[2].v))
    return text, it[1].v
end

local function epoch(ctx, tree, node, field, label)
    if not expect(ctx, tree, node, "arr", "an epoch") then return end
    local it = node.items
    if #it ~= 3 or not expect(ctx, tree, it[1], "int", "a round")
            or not (it[2].t == "float" or it[2].t == "int")
            or not expect(ctx, tree, it[3], "str", "a starter") then
        bad(ctx, tree, "an epoch is [round, time, starter]")
        return
    end
    local text = dec(it[1].v) .. "/" .. it[3].v .. "@" .. string.format("%.6f", num(it[2].v))
    local t = tree:add(field, range_of(ctx, node), text)
    t:set_text(label .. ": " .. text)
    add_uint(t, F.i_epoch_round, ctx, it[1])
    t:add(F.i_epoch_time, range_of(ctx, it[2]), num(it[2].v))
    t:add(F.i_epoch_starter, range_of(ctx, it[3]), it[3].v)
    return text
end

local function infra_record(ctx, tree, r)
    if not expect(ctx, tree, r, "arr", "a record") then return end
    local it = r.items
    local t = tree:add(F.i_record, range_of(ctx, r))
    if #it ~= 11 then
        bad(ctx, t, "a record has 11 fields")
        return
    end
    local types = { "int", "int", "int", "str", "int", "int", "int", "int", "bin", "str", "int" }
    for i = 1, 11 do
        if not expect(ctx, t, it[i], types[i], types[i]) then return end
    end
    local node_, join = it[4].v, it[5].v
    local mid = node_ .. "#" .. hex8(join)
    local app_mid = node_ .. ":" .. dec(it[7].v)
    add_uint(t, F.i_rec_lsn, ctx, it[1])
    add_uint(t, F.i_rec_gseq, ctx, it[2])
    if type(it[3].v) ~= "number" or it[3].v > 255 then
        bad(ctx, t, "record kind " .. dec(it[3].v) .. " out of range")
        return
    end
    t:add(F.i_rec_kind, range_of(ctx, it[3]), it[3].v)
    t:add(F.i_rec_mid, span(ctx, it[4], it[5]), mid)
    add_uint(t, F.i_rec_nseq, ctx, it[6])
    add_uint(t, F.i_rec_app_seq, ctx, it[7])
    local kind = INFRA_RECORD_KINDS[it[3].v] or ("kind " .. dec(it[3].v))
    if it[3].v == 0 then t:add(F.i_rec_app_mid, span(ctx, it[4], it[7]), app_mid):set_generated() end
    local host_record = INFRA_HOST_RECORDS[it[3].v]
    if host_record then t:add(F.i_rec_host, range_of(ctx, it[4]), node_):set_generated() end
    add_uint(t, F.i_rec_prememb, ctx, it[8])
    t:add(F.i_rec_body_len, range_of(ctx, it[9]), it[9].blen)
    if it[9].blen > 0 then t:add(F.i_rec_body, ctx.tvb(it[9].boff, it[9].blen)) end
    local group = it[10].v
    t:add(F.i_rec_group, range_of(ctx, it[10]), group)
    add_uint(t, F.i_rec_gpos, ctx, it[11])
    local text = "lsn " .. dec(it[1].v) .. " gseq " .. dec(it[2].v) .. " " .. kind .. " "
        .. (it[3].v == 0 and app_mid or host_record and ("host " .. node_) or mid)
        .. (group ~= "" and (" group " .. group .. (it[3].v == 0 and (" #" .. dec(it[11].v)) or ""))
            or "")
    t:set_text("Record " .. text)
    ctx.mids[#ctx.mids + 1] = it[3].v == 0 and ("gseq " .. dec(it[2].v) .. "=" .. app_mid)
        or host_record and (kind .. " " .. node_) or kind
end

local function list_head(ctx, tree, node, field, name, what)
    if not expect(ctx, tree, node, "arr", what) then return end
    local t = tree:add(field, range_of(ctx, node))
    t:set_text(label_of(name) .. " (" .. #node.items .. ")")
    return t
end

function IR.int(ctx, tree, node, field, name) return GR.uint(ctx, tree, node, field, name) end
function IR.str(ctx, tree, node, field) return GR.pid(ctx, tree, node, field) end
function IR.bool(ctx, tree, node, field) return GR.bool(ctx, tree, node, field) end

function IR.bytes(ctx, tree, node, field)
    if expect(ctx, tree, node, "bin", "bytes") then
        tree:add(field, ctx.tvb(node.boff, node.blen))
        return node.blen .. " bytes"
    end
end

function IR.mid(ctx, tree, node, field, name)
    local text, node_ = member_id(ctx, tree, node, field, label_of(name))
    ctx.node = ctx.node or node_
    return text
end

function IR.opt_mid(ctx, tree, node, field, name)
    if node.t == "nil" then
        tree:add(field, range_of(ctx, node), ""):set_text(label_of(name) .. ": none")
        return
    end
    return IR.mid(ctx, tree, node, field, name)
end

function IR.epoch(ctx, tree, node, field, name) return epoch(ctx, tree, node, field, label_of(name)) end

function IR.opt_epoch(ctx, tree, node, field, name)
    if node.t == "nil" then
        tree:add(field, range_of(ctx, node), ""):set_text(label_of(name) .. ": none")
        return
    end
    return epoch(ctx, tree, node, field, label_of(name))
end

function IR.records(ctx, tree, node, field, name)
    local t = list_head(ctx, tree, node, field, name, "a list of records")
    if not t then return end
    local before = #ctx.mids
    for _, r in ipairs(node.items) do infra_record(ctx, t, r) end
    local parts = {}
    for i = before + 1, #ctx.mids do parts[#parts + 1] = ctx.mids[i] end
    return #parts .. " [" .. table.concat(parts, " ") .. "]"
end

-- A cell; ``valued``: its field is a string field, given the cell's host.
local function cellinfo(ctx, tree, node, field, label, valued)
    if not expect(ctx, tree, node, "arr", "a cell") then return end
    local it = node.items
    local host = #it >= 1 and it[1].t == "str" and it[1].v or ""
    local t = valued and tree:add(field, range_of(ctx, node), host)
        or tree:add(field, range_of(ctx, node))
    if #it ~= 4 or not expect(ctx, t, it[1], "str", "a host") or not expect(ctx, t, it[2], "str", "a cell")
            or not expect(ctx, t, it[3], "str", "an uplink") or not expect(ctx, t, it[4], "int", "a load") then
        bad(ctx, t, "a cell is [host, cell, uplink, load]")
        return
    end
    t:add(F.i_cell_host, range_of(ctx, it[1]), it[1].v)
    t:add(F.i_cell_cell, range_of(ctx, it[2]), it[2].v)
    t:add(F.i_cell_uplink, range_of(ctx, it[3]), it[3].v)
    add_uint(t, F.i_cell_load, ctx, it[4])
    t:set_text(label .. ": " .. it[1].v .. " " .. it[2].v .. " uplink " .. it[3].v .. " load " .. dec(it[4].v))
    return it[1].v
end

function IR.cell(ctx, tree, node, field, name)
    return cellinfo(ctx, tree, node, field, label_of(name), true)
end

function IR.cells(ctx, tree, node, field, name)
    local t = list_head(ctx, tree, node, field, name, "a list of cells")
    if not t then return end
    for _, c in ipairs(node.items) do cellinfo(ctx, t, c, F.i_cellinfo, "Cell") end
    return dec(#node.items)
end

function IR.mids(ctx, tree, node, field, name)
    local t = list_head(ctx, tree, node, field, name, "a list of member ids")
    if not t then return end
    for _, m in ipairs(node.items) do member_id(ctx, t, m, F.i_member_id, "Member") end
    return dec(#node.items)
end

function IR.items(ctx, tree, node, field, name)
    local t = list_head(ctx, tree, node, field, name, "a list of NEW items")
    if not t then return end
    local parts = {}
    for _, item in ipairs(node.items) do
        if expect(ctx, t, item, "arr", "a NEW item") then
            local it = item.items
            local nt = t:add(F.i_item, range_of(ctx, item))
            if #it == 5 and expect(ctx, nt, it[1], "int", "a NEW number")
                    and expect(ctx, nt, it[2], "int", "a seqno") and expect(ctx, nt, it[3], "bin", "a body")
                    and expect(ctx, nt, it[4], "str", "a group") and expect(ctx, nt, it[5], "int", "a kind") then
                add_uint(nt, F.i_item_nseq, ctx, it[1])
                add_uint(nt, F.i_item_app_seq, ctx, it[2])
                local app_mid = (ctx.node or "?") .. ":" .. dec(it[2].v)
                nt:add(F.i_item_app_mid, range_of(ctx, it[2]), app_mid):set_generated()
                nt:add(F.i_item_body_len, range_of(ctx, it[3]), it[3].blen)
                if it[3].blen > 0 then nt:add(F.i_item_body, ctx.tvb(it[3].boff, it[3].blen)) end
                nt:add(F.i_item_group, range_of(ctx, it[4]), it[4].v)
                nt:add(F.i_item_kind, range_of(ctx, it[5]), it[5].v)
                local what = it[5].v == 8 and ("join " .. it[4].v) or it[5].v == 9
                    and ("leave " .. it[4].v) or (app_mid .. " to " .. it[4].v .. ", "
                                                  .. it[3].blen .. " bytes")
                nt:set_text("NEW " .. dec(it[1].v) .. ": " .. what)
                parts[#parts + 1] = it[5].v == 0 and app_mid or what
            else
                bad(ctx, nt, "a NEW item is [nseq, app_seq, body, group, kind]")
            end
        end
    end
    return "[" .. table.concat(parts, " ") .. "]"
end

function IR.pairs(ctx, tree, node, field, name)
    local t = list_head(ctx, tree, node, field, name, "a list of pairs")
    if not t then return end
    for _, p in ipairs(node.items) do
        if expect(ctx, t, p, "arr", "a pair") and #p.items == 2
                and expect(ctx, t, p.items[2], "int", "a seqno") then
            local text = member_id(ctx, t, p.items[1], F.i_member_id, "Member")
            local s = add_uint(t, F.i_pair_stable, ctx, p.items[2])
            if text then s:append_text(" (" .. text .. ")") end
        end
    end
    return dec(#node.items)
end

function IR.strs(ctx, tree, node, field, name)
    if not expect(ctx, tree, node, "arr", "a list of strings") then return end
    local t = tree:add(range_of(ctx, node), label_of(name) .. " (" .. #node.items .. ")")
    local parts = {}
    for _, s in ipairs(node.items) do
        if expect(ctx, t, s, "str", "a string") then
            t:add(field, range_of(ctx, s), s.v)
            parts[#parts + 1] = s.v
        end
    end
    return "[" .. table.concat(parts, " ") .. "]"
end

function IR.opt_snapshot(ctx, tree, node, field, name)
    local t = tree:add(field, range_of(ctx, node))
    if node.t == "nil" then
        t:set_text(label_of(name) .. ": none")
        return
    end
    if not expect(ctx, t, node, "arr", "a snapshot") then return end
    local it = node.items
    if #it ~= 9 or not expect(ctx, t, it[1], "int", "a position") or not expect(ctx, t, it[2], "int", "a gseq")
            or not expect(ctx, t, it[3], "int", "a gseq") or not expect(ctx, t, it[4], "arr", "rows")
            or not expect(ctx, t, it[5], "arr", "a member cache")
            or not expect(ctx, t, it[6], "arr", "a list of retired hosts")
            or not expect(ctx, t, it[7], "int", "a position")
            or not expect(ctx, t, it[8], "int", "a sequence id")
            or not expect(ctx, t, it[9], "arr", "a list of groups") then
        bad(ctx, t, "a snapshot is [lsn, gseq, last_app_gseq, rows, mcache, retired, config_lsn, sequence, groups]")
        return
    end
    add_uint(t, F.i_snap_lsn, ctx, it[1])
    add_uint(t, F.i_snap_gseq, ctx, it[2])
    add_uint(t, F.i_snap_last_app, ctx, it[3])
    local rt = t:add(range_of(ctx, it[4]), "Rows (" .. #it[4].items .. ")")
    for _, row in ipairs(it[4].items) do
        if expect(ctx, rt, row, "arr", "a row") and #row.items == 6 then
            local r = row.items
            local rowt = rt:add(F.i_row, range_of(ctx, row))
            local text = member_id(ctx, rowt, r[1], F.i_member_id, "Member")
            local ok = expect(ctx, rowt, r[2], "int", "first") and expect(ctx, rowt, r[3], "int", "last")
                and expect(ctx, rowt, r[4], "int", "recv") and expect(ctx, rowt, r[5], "bool", "member")
                and expect(ctx, rowt, r[6], "int", "an application seqno")
            if ok then
                add_uint(rowt, F.i_row_first, ctx, r[2])
                add_uint(rowt, F.i_row_last, ctx, r[3])
                add_uint(rowt, F.i_row_recv, ctx, r[4])
                rowt:add(F.i_row_member, range_of(ctx, r[5]), r[5].v)
                add_uint(rowt, F.i_row_app_seq, ctx, r[6])
                rowt:set_text("Row " .. (text or "?") .. " first " .. dec(r[2].v) .. " last "
                              .. dec(r[3].v) .. " recv " .. dec(r[4].v))
            end
        else
            bad(ctx, rt, "a row is [mid, first, last, recv, member, app_seq]")
        end
    end
    local mt = t:add(range_of(ctx, it[5]), "Member cache (" .. #it[5].items .. ")")
    for _, m in ipairs(it[5].items) do member_id(ctx, mt, m, F.i_member_id, "Member") end
    local retired = IR.strs(ctx, t, it[6], F.i_snap_retired, "retired hosts")
    local ct = add_uint(t, F.i_snap_config_lsn, ctx, it[7])
    ct:append_text(" (the record that last changed the retired hosts)")
    add_uint(t, F.i_snap_sequence, ctx, it[8])
    local gt = t:add(range_of(ctx, it[9]), "Groups (" .. #it[9].items .. ")")
    for _, g in ipairs(it[9].items) do
        if expect(ctx, gt, g, "arr", "a group") and #g.items == 3
                and expect(ctx, gt, g.items[1], "str", "a name") and expect(ctx, gt, g.items[2], "int", "a count")
                and expect(ctx, gt, g.items[3], "arr", "members") then
            local gi = g.items
            local grt = gt:add(F.i_grow, range_of(ctx, g))
            grt:add(F.i_grow_name, range_of(ctx, gi[1]), gi[1].v)
            add_uint(grt, F.i_grow_count, ctx, gi[2])
            for _, m in ipairs(gi[3].items) do member_id(ctx, grt, m, F.i_grow_member, "Member") end
            grt:set_text("Group " .. gi[1].v .. ": " .. dec(gi[2].v) .. " messages, "
                         .. #gi[3].items .. " members")
        else
            bad(ctx, gt, "a group is [name, count, [mid, ...]]")
        end
    end
    t:set_text(label_of(name) .. ": lsn " .. dec(it[1].v) .. ", gseq " .. dec(it[2].v) .. ", "
               .. #it[4].items .. " rows, retired " .. (retired or "?"))
    return "lsn " .. dec(it[1].v)
end

local REQUEST_TAGS = { [11] = true, [12] = true, [13] = true, [14] = true }

function IR.request(ctx, tree, node, _, name)
    local t = tree:add(range_of(ctx, node), label_of(name))  -- a subtree: see INFRA_FT
    if not expect(ctx, t, node, "arr", "a request") or #node.items < 1
            or not expect(ctx, t, node.items[1], "int", "a message tag") then
        return
    end
    local tag = node.items[1].v
    local schema = INFRA_TAGS[tag]
    if not schema or not REQUEST_TAGS[tag] then
        bad(ctx, t, "not a member request: tag " .. dec(tag))
        return
    end
    t:add(F.i_request_tag, range_of(ctx, node.items[1]), tag)
    local rest = { items = {} }
    for i = 2, #node.items do rest.items[i - 1] = node.items[i] end
    local info = render_fields(ctx, t, rest, schema.fields, IR, IF)
    t:set_text(label_of(name) .. ": " .. schema[1] .. " " .. info)
    return schema[1] .. "(" .. info .. ")"
end

-- The message in a frame body (msgpack [tag, fields...]) at tvb[off, off+len).
local function infra_body(tvb, pinfo, t, off, len)
    local ctx = { tvb = tvb, pinfo = pinfo, mids = {} }
    local node, err = mp_read(tvb, off, off + len, 0)
    if not node then
        bad(ctx, t, "body: " .. err)
        return "malformed body"
    end
    if node.len ~= len then bad(ctx, t, "bytes after the body") end
    if not expect(ctx, t, node, "arr", "a message array") or #node.items < 1
            or not expect(ctx, t, node.items[1], "int", "a message tag") then
        return "malformed body"
    end
    local tag = node.items[1].v
    local schema = INFRA_TAGS[tag]
    if type(tag) ~= "number" or tag > 255 then
        bad(ctx, t, "message tag " .. dec(tag) .. " out of range")
        return "malformed body"
    end
    local ti = t:add(F.i_tag, range_of(ctx, node.items[1]), tag)
    if not schema then
        ti:add_proto_expert_info(E.unknown, "unknown infrastructure message tag " .. dec(tag))
        return "unknown message " .. dec(tag)
    end
    t:add(F.i_link, range_of(ctx, node.items[1]), schema[2]):set_generated()
    local rest = { items = {} }
    for i = 2, #node.items do rest.items[i - 1] = node.items[i] end
    local info = render_fields(ctx, t, rest, schema.fields, IR, IF)
    return schema[1] .. (info ~= "" and " " .. info or ""), schema
end

local LINK_NAMES = { downlink = "cell downlink", uplink = "cell uplink", backbone = "backbone" }

-- One infrastructure-mode frame (a UDP datagram or one backbone frame).
local function dissect_infra(tvb, pinfo, tree, via)
    local n = tvb:len()
    pinfo.cols.protocol = "M2MC-INFRA"
    local t = tree:add(p_infra, tvb())
    if n < INFRA_HEADER then
        t:add_proto_expert_info(E.malformed, "shorter than a frame header")
        return "infra (truncated)"
    end
    local magic = tvb(0, 3):raw()
    t:add(F.i_magic, tvb(0, 3))
    local text, schema
    if magic == INFRA_MAGIC then
        t:add(F.i_sealed, tvb(2, 1), false)
        local crc = tvb(3, 4):uint()
        local ok = crc32(raw_from(tvb, INFRA_HEADER)) == crc
        local ci = t:add(F.i_crc, tvb(3, 4))
        ci:add(F.i_crc_ok, tvb(3, 4), ok):set_generated()
        if not ok then ci:add_proto_expert_info(E.bad_crc) end
        text, schema = infra_body(tvb, pinfo, t, INFRA_HEADER, n - INFRA_HEADER)
    elseif magic == INFRA_SEALED_MAGIC then
        t:add(F.i_sealed, tvb(2, 1), true)
        local rlen = tvb(3, 1):uint()
        if rlen > MAX_RECEIVER or n < 4 + rlen then
            t:add_proto_expert_info(E.malformed, "bad receiver length")
            return "infra sealed (malformed)"
        end
        t:add(F.i_receiver, tvb(3, 1 + rlen), text_at(tvb, 4, rlen))
        local body, blen, suite, sender = dissect_auth(tvb, 4 + rlen, t, pinfo)
        if not body then return "infra sealed (truncated authentication)" end
        if suite ~= 1 then
            text = "sealed frame from " .. sender .. " (encrypted)"
        else
            text, schema = infra_body(tvb, pinfo, t, body, blen)
            text = text .. " (sealed by " .. sender .. ")"
        end
    else
        t:add_proto_expert_info(E.malformed, "not an infrastructure-mode frame (bad magic)")
        return "infra (bad magic)"
    end
    local link = schema and LINK_NAMES[schema[2]] or (via == "tcp" and "backbone" or "cell")
    t:set_text("m2mc infrastructure mode, " .. link .. ": " .. text)
    return link .. " " .. text
end

---------------------------------------------------------------------------- M2MP
local m2mp_state = { partial = {}, done = {}, frames = {}, group_keys = {}, partial_bytes = 0 }
local MAX_FRAGMENT_NUMBER = 200000
local MAX_PARTIAL_BYTES = 256 * 1024 * 1024

function p_m2mp.init()
    m2mp_state = { partial = {}, done = {}, frames = {}, group_keys = {}, partial_bytes = 0 }
    learned_names = {}
end

local function message_key(pinfo, msgid)
    return tostring(pinfo.src) .. "|" .. tostring(pinfo.src_port) .. "|" .. msgid
end

local function looks_like_group(tvb, off)
    if tvb:len() < off + GROUP_HEADER then return false end
    if tvb(off, 3):raw() ~= GROUP_MAGIC .. string.char(GROUP_VERSION) then return false end
    return GROUP_KINDS[tvb(off + 11, 1):uint()] ~= nil and tvb(off + 12, 1):uint() <= GROUP_FLAG_AUTH
end

-- First pass: record the packet's part in its message; returns the frame's note.
local function m2mp_track(tvb, pinfo, key, frag, last)
    local st = m2mp_state
    local note = {}
    local done = st.done[key]
    if frag == 0 and last then
        if done then note.copy_of = done.frame else st.done[key] = { frame = pinfo.number } end
        note.complete = not done
        return note
    end
    if done then
        note.copy_of = done.frames and done.frames[frag] or done.frame
        note.msg = done
        return note
    end
    local msg = st.partial[key]
    if not msg then
        if frag > MAX_FRAGMENT_NUMBER or st.partial_bytes > MAX_PARTIAL_BYTES then
            note.untracked = true
            return note
        end
        msg = { frags = {}, frames = {}, count = 0 }
        st.partial[key] = msg
    end
    note.msg = msg
    if msg.frames[frag] then
        note.copy_of = msg.frames[frag]
        return note
    end
    if (msg.last and (frag > msg.last or last)) or (last and msg.max and msg.max > frag) then
        note.contradictory = true
        return note
    end
    local len = tvb:len() - M2MP_HEADER
    msg.frags[frag] = len > 0 and tvb(M2MP_HEADER, len):bytes() or ByteArray.new()
    msg.frames[frag] = pinfo.number
    msg.count = msg.count + 1
    msg.max = math.max(msg.max or 0, frag)
    st.partial_bytes = st.partial_bytes + len
    if last then msg.last = frag end
    if msg.last and msg.count == msg.last + 1 then
        local whole = ByteArray.new()
        for i = 0, msg.last do
            whole:append(msg.frags[i])
            st.partial_bytes = st.partial_bytes - msg.frags[i]:len()
        end
        msg.frags = nil
        msg.frame = pinfo.number
        msg.whole = whole
        st.partial[key] = nil
        st.done[key] = msg
        note.complete = true
    end
    return note
end

local function dissect_message(mtvb, pinfo, tree)
    if looks_like_group(mtvb, 0) then return safely(tree, dissect_group, mtvb, pinfo, tree) end
    Dissector.get("data"):call(mtvb, pinfo, tree)
    return nil
end

-- One packet; ``slot`` tells the packets of one frame apart (see dissect_m2mp).
local function dissect_packet(tvb, pinfo, tree, slot)
    local n = tvb:len()
    pinfo.cols.protocol = "M2MP"
    local t = tree:add(p_m2mp, tvb())
    if n < M2MP_HEADER or n > M2MP_MAX_DATAGRAM then
        t:add_proto_expert_info(E.bad_packet, "an M2MP packet has 8 to 65507 bytes, this one " .. n)
        pinfo.cols.info = "M2MP: not a packet (" .. n .. " bytes)"
        return n
    end
    local msgid = tvb(0, 4):uint()
    local word = tvb(4, 4):uint()
    local last = word >= 2147483648
    local frag = word % 2147483648
    t:add(F.msgid, tvb(0, 4))
    t:add(F.last, tvb(4, 4))
    t:add(F.fragment, tvb(4, 4))
    t:add(F.payload_len, n > M2MP_HEADER and tvb(M2MP_HEADER, n - M2MP_HEADER) or tvb(4, 4),
          n - M2MP_HEADER):set_generated()
    if n > M2MP_HEADER then t:add(F.payload, tvb(M2MP_HEADER, n - M2MP_HEADER)) end
    local key = message_key(pinfo, msgid)
    local note = m2mp_state.frames[slot]
    if not pinfo.visited or not note then
        note = m2mp_track(tvb, pinfo, key, frag, last)
        if frag == 0 and looks_like_group(tvb, M2MP_HEADER) then m2mp_state.group_keys[key] = true end
        m2mp_state.frames[slot] = note
    end
    local head = string.format("M2MP id 0x%08x", msgid)
    t:set_text(string.format("M2MP packet, message 0x%08x, fragment %d%s", msgid, frag,
                             last and " (last)" or ""))
    if note.copy_of then
        t:add(F.copy_of, tvb(0, 8), note.copy_of):set_generated()
        t:add_proto_expert_info(E.copy, "redundant copy of frame " .. note.copy_of)
    end
    local info
    if frag == 0 and last then
        t:add(F.message_len, tvb(4, 4), n - M2MP_HEADER):set_generated()
        info = n > M2MP_HEADER and dissect_message(tvb(M2MP_HEADER):tvb(), pinfo, tree) or nil
        info = info or (head .. ", " .. (n - M2MP_HEADER) .. " bytes")
    elseif note.complete and note.msg and note.msg.whole then
        local msg = note.msg
        local mtvb = msg.whole:tvb("Reassembled M2MP message")
        t:add(F.message_len, tvb(4, 4), mtvb:len()):set_generated()
        t:add(F.fragments, tvb(4, 4), msg.last + 1):set_generated()
        for i = 0, msg.last do t:add(F.fragment_in, tvb(4, 4), msg.frames[i]):set_generated() end
        if mtvb:len() > 0 then t:add(F.message, mtvb()) end
        info = dissect_message(mtvb, pinfo, tree)
        info = (info or (head .. ", " .. mtvb:len() .. " bytes")) .. " [" .. (msg.last + 1) .. " fragments]"
    else
        info = head .. " fragment " .. frag .. (last and " (last)" or "")
        local msg = note.msg
        if msg and msg.frame then
            t:add(F.reassembled_in, tvb(0, 4), msg.frame):set_generated()
            info = info .. " [reassembled in " .. msg.frame .. "]"
        elseif not note.copy_of then
            t:add_proto_expert_info(E.incomplete, note.contradictory and "contradicts earlier fragments"
                                    or "message not (yet) complete in the capture")
        end
    end
    if note.copy_of then info = info .. " [copy of " .. note.copy_of .. "]" end
    pinfo.cols.info = info
    return n
end

-- A frame longer than 508 bytes is either one packet of a larger packet size (packet=,
-- docs/m2mp.md) or several packets captured where the sender's kernel had not cut them
-- yet (UDP segmentation offload: on loopback, on a bridge, before a network card that
-- cuts it): packets of S bytes back to back, the last possibly shorter, S being the
-- sender's packet size (508 unless it named more; at most 32753, as two must fit).
-- What follows a packet in a joined frame is a copy or the next fragment of its message,
-- or the first fragment of another message. So S is the first offset from 508 on where
-- the first packet's message ID comes again with its fragment number or the next one;
-- failing that, 508 if a first fragment of another message (a nonzero ID) starts there;
-- failing that, the frame is one packet.
local MAX_JOINED_SEGMENT = 32753

local function segment_size(tvb)
    local n = tvb:len()
    local full = M2MP_HEADER + M2MP_MAX_FRAGMENT
    if n < full + M2MP_HEADER then return nil end  -- no room for a second packet
    local raw = tvb:raw(0, math.min(n, MAX_JOINED_SEGMENT + M2MP_HEADER))
    local id = raw:sub(1, 4)
    local frag = tvb(4, 4):uint() % 2147483648
    local at = full + 1
    while true do
        at = raw:find(id, at, true)
        if not at or at - 1 + M2MP_HEADER > n then break end
        local next_frag = tvb(at + 3, 4):uint() % 2147483648
        if next_frag == frag or next_frag == frag + 1 then return at - 1 end
        at = at + 1
    end
    local word = tvb(full + 4, 4):uint()
    -- (a random message ID is 0 once in 2^32 times; zeros in a large packet often)
    if tvb(full, 4):uint() ~= 0 and (word == 0 or word == 2147483648) then return full end
    return nil
end

local function dissect_m2mp(tvb, pinfo, tree)
    local n = tvb:len()
    local size = n > M2MP_HEADER + M2MP_MAX_FRAGMENT and segment_size(tvb) or nil
    if not size then return dissect_packet(tvb, pinfo, tree, pinfo.number) end
    local infos = {}
    local count = 0
    for off = 0, n - 1, size do
        count = count + 1
        dissect_packet(tvb(off, math.min(size, n - off)):tvb(), pinfo, tree,
                       pinfo.number .. "/" .. count)
        infos[#infos + 1] = tostring(pinfo.cols.info)
    end
    pinfo.cols.info = "[" .. count .. " packets, segmented] " .. table.concat(infos, "; ")
    return n
end

p_m2mp.dissector = dissect_m2mp

-- The heuristic: a packet whose fragment 0 starts a group message (magic, version,
-- a known kind, known flags), or a later fragment of such a message.
local function heur_m2mp(whole, pinfo, tree)
    -- A segmented frame (see dissect_m2mp) is judged by its first packet.
    local size = whole:len() > M2MP_HEADER + M2MP_MAX_FRAGMENT and segment_size(whole) or nil
    local tvb = size and whole(0, size):tvb() or whole
    local n = tvb:len()
    if n < M2MP_HEADER or n > M2MP_MAX_DATAGRAM then return false end
    local word = tvb(4, 4):uint()
    local last = word >= 2147483648
    local frag = word % 2147483648
    -- every packet of a message but its last is full: 508 bytes, or more at a larger size
    if not last and n < M2MP_HEADER + M2MP_MAX_FRAGMENT then return false end
    if frag == 0 then
        if not looks_like_group(tvb, M2MP_HEADER) then return false end
    elseif not m2mp_state.group_keys[message_key(pinfo, tvb(0, 4):uint())] then
        return false
    end
    dissect_m2mp(whole, pinfo, tree)
    return true
end

p_m2mp:register_heuristic("udp", heur_m2mp)

---------------------------------------------------------------------------- infra pieces
-- A frame larger than its cell's MTU travels as pieces (m2mc.infra.pieces): "IM" 2,
-- frame id (4 bytes), index, count, then the frame's bytes from index * size on. The
-- pieces of one sender's frame id are put together in the capture's first pass; the
-- last one to arrive shows the whole frame.
local piece_state = { partial = {}, notes = {} }

function p_infra.init()
    piece_state = { partial = {}, notes = {} }
end

local function is_piece(tvb)
    local n = tvb:len()
    if n <= INFRA_PIECE_HEADER or tvb(0, 3):raw() ~= INFRA_PIECE_MAGIC then return false end
    local count = tvb(8, 1):uint()
    return count >= 2 and tvb(7, 1):uint() < count
end

local function dissect_piece(tvb, pinfo, tree, via)
    pinfo.cols.protocol = "M2MC-INFRA"
    local t = tree:add(p_infra, tvb())
    t:add(F.i_magic, tvb(0, 3))
    local id, index, count = tvb(3, 4):uint(), tvb(7, 1):uint(), tvb(8, 1):uint()
    t:add(F.i_piece_frame, tvb(3, 4))
    t:add(F.i_piece_index, tvb(7, 1))
    t:add(F.i_piece_count, tvb(8, 1))
    local head = string.format("piece %d of %d of frame 0x%08x", index + 1, count, id)
    t:set_text("m2mc infrastructure mode, cell: " .. head)
    local note = piece_state.notes[pinfo.number]
    if not note then
        note = {}
        local key = tostring(pinfo.src) .. "|" .. tostring(pinfo.src_port) .. "|" .. id
        local p = piece_state.partial[key]
        if not p or p.count ~= count or p.whole then
            p = { count = count, parts = {}, frames = {}, have = 0 }
            piece_state.partial[key] = p
        end
        if not p.parts[index] then
            p.parts[index] = tvb(INFRA_PIECE_HEADER):bytes()
            p.frames[index] = pinfo.number
            p.have = p.have + 1
        end
        if p.have == count then
            local whole = ByteArray.new()
            for i = 0, count - 1 do whole:append(p.parts[i]) end
            p.whole, p.frame, p.parts = whole, pinfo.number, nil
            note.complete = true
        end
        note.p = p
        piece_state.notes[pinfo.number] = note
    end
    local p = note.p
    if note.complete then
        for i = 0, count - 1 do t:add(F.i_piece_of, tvb(3, 4), p.frames[i]):set_generated() end
        local text = dissect_infra(p.whole:tvb("Infrastructure frame put together"), pinfo,
                                   tree, via)
        return text .. " [" .. count .. " pieces]"
    end
    if p.frame then
        t:add(F.i_piece_in, tvb(3, 4), p.frame):set_generated()
        return "infra " .. head .. " [put together in " .. p.frame .. "]"
    end
    return "infra " .. head .. " [not complete in the capture]"
end

---------------------------------------------------------------------------- infra over UDP
local function looks_like_infra(tvb)
    local n = tvb:len()
    if is_piece(tvb) then return true end
    if n < INFRA_HEADER then return false end
    local magic = tvb(0, 3):raw()
    if magic == INFRA_MAGIC then
        return crc32(raw_from(tvb, INFRA_HEADER)) == tvb(3, 4):uint()
    end
    if magic ~= INFRA_SEALED_MAGIC then return false end
    local rlen = tvb(3, 1):uint()
    local at = 4 + rlen
    if rlen > MAX_RECEIVER or n < at + 4 then return false end
    local slen = tvb(at + 3, 1):uint()
    return tvb(at, 1):uint() == AUTH_VERSION and AUTH_SUITES[tvb(at + 1, 1):uint()] ~= nil
        and slen >= 1 and slen <= MAX_SENDER and n >= at + 4 + slen + 8 + AUTH_TAG_SIZE
end

function p_infra.dissector(tvb, pinfo, tree)
    local dissect = is_piece(tvb) and dissect_piece or dissect_infra
    pinfo.cols.info = safely(tree, dissect, tvb, pinfo, tree, "udp")
    return tvb:len()
end

p_infra:register_heuristic("udp", function(tvb, pinfo, tree)
    if not looks_like_infra(tvb) then return false end
    p_infra.dissector(tvb, pinfo, tree)
    return true
end)

---------------------------------------------------------------------------- backbone (TCP)
-- Both ends ("address|port") of every backbone connection decoded in this capture: a
-- host's backbone address among them takes a connection that only greets (a host
-- connecting to one it then has nothing to say to, e.g. a retired host).
local backbone_endpoints = {}

function p_backbone.init()
    backbone_endpoints = {}
end

local function endpoint(address, port)
    return tostring(address) .. "|" .. tostring(port)
end

local function dissect_backbone(tvb, pinfo, tree)
    local n, off = tvb:len(), 0
    backbone_endpoints[endpoint(pinfo.src, pinfo.src_port)] = true
    backbone_endpoints[endpoint(pinfo.dst, pinfo.dst_port)] = true
    local infos = {}
    pinfo.cols.protocol = "M2MC-INFRA"
    while off < n do
        if n - off < 4 then
            pinfo.desegment_offset = off
            pinfo.desegment_len = DESEGMENT_ONE_MORE_SEGMENT
            break
        end
        local size = tvb(off, 4):uint()
        if size > MAX_BACKBONE_FRAME then
            local t = tree:add(p_backbone, tvb(off))
            t:add_proto_expert_info(E.malformed, "frame of " .. size .. " bytes (over 64 MiB)")
            infos[#infos + 1] = "oversized frame"
            off = n
            break
        end
        if n - off - 4 < size then
            pinfo.desegment_offset = off
            pinfo.desegment_len = size - (n - off - 4)
            break
        end
        local t = tree:add(p_backbone, tvb(off, 4 + size))
        t:add(F.i_length, tvb(off, 4))
        local magic = size >= 3 and tvb(off + 4, 3):raw() or ""
        if magic == INFRA_MAGIC or magic == INFRA_SEALED_MAGIC then
            t:set_text("m2mc backbone frame, " .. size .. " bytes")
            infos[#infos + 1] = safely(tree, dissect_infra, tvb(off + 4, size):tvb(), pinfo, tree, "tcp")
        else
            local name = text_at(tvb, off + 4, size)
            t:add(F.i_peer, tvb(off + 4, size), name)
            t:set_text("m2mc backbone greeting: host " .. name)
            if size == 0 or size > MAX_PEER_NAME then
                t:add_proto_expert_info(E.malformed, "a host name has 1 to 64 bytes")
            end
            infos[#infos + 1] = "backbone greeting from " .. name
        end
        off = off + 4 + size
    end
    if #infos > 0 then
        -- TCP calls us again for what follows a reassembled frame in the same segment,
        -- and keeps (fences) what we wrote the first time: separate the two
        local before = tostring(pinfo.cols.info)
        local text = table.concat(infos, "; ")
        local ours_before = before:find("^cell ") or before:find("^backbone ")
        pinfo.cols.info = ours_before and ("; " .. text) or text
    end
    return n  -- all taken: whole frames dissected, the rest asked for by desegment_len
end

p_backbone.dissector = dissect_backbone

local function printable(s)
    return s:find("[\0-\31\127]") == nil
end

-- A segment that starts with a frame (a length, then the infrastructure magic), or with
-- the greeting (a host name) followed by a frame. A greeting alone in its segment is
-- taken only towards a backbone address seen in the capture; otherwise it is left to the
-- conversation, which the stream's first frame assigns to this dissector.
local function looks_like_backbone(tvb, pinfo)
    local n = tvb:len()
    if n < 5 then return false end
    local size = tvb(0, 4):uint()
    if size == 0 or size > MAX_BACKBONE_FRAME then return false end
    local magic = n >= 7 and tvb(4, 3):raw() or ""
    if size >= INFRA_HEADER and (magic == INFRA_MAGIC or magic == INFRA_SEALED_MAGIC) then
        return true
    end
    if n == 4 + size and size <= MAX_PEER_NAME then  -- a greeting alone
        return printable(tvb(4, size):raw())
            and backbone_endpoints[endpoint(pinfo.dst, pinfo.dst_port)] == true
    end
    if size > MAX_PEER_NAME or n < 4 + size + 4 + 3 then return false end
    if not printable(tvb(4, size):raw()) then return false end
    local next_size = tvb(4 + size, 4):uint()
    local next_magic = tvb(4 + size + 4, 3):raw()
    return next_size >= INFRA_HEADER and next_size <= MAX_BACKBONE_FRAME
        and (next_magic == INFRA_MAGIC or next_magic == INFRA_SEALED_MAGIC)
end

p_backbone:register_heuristic("tcp", function(tvb, pinfo, tree)
    if not looks_like_backbone(tvb, pinfo) then return false end
    pinfo.conversation = p_backbone
    dissect_backbone(tvb, pinfo, tree)
    return true
end)

---------------------------------------------------------------------------- ports
local udp_table = DissectorTable.get("udp.port")
local tcp_table = DissectorTable.get("tcp.port")
local registered = {}

local function register_ports(name, dtable, proto, ports)
    if registered[name] and registered[name] ~= "" then dtable:remove(registered[name], proto) end
    if ports and ports ~= "" then dtable:add(ports, proto) end
    registered[name] = ports or ""
end

local function apply_prefs()
    register_ports("m2mp", udp_table, p_m2mp, p_m2mp.prefs.udp_ports)
    register_ports("infra", udp_table, p_infra, p_infra.prefs.udp_ports)
    register_ports("backbone", tcp_table, p_backbone, p_backbone.prefs.tcp_ports)
end

p_m2mp.prefs_changed = apply_prefs
p_infra.prefs_changed = apply_prefs
p_backbone.prefs_changed = apply_prefs
p_m2mc.prefs_changed = refresh_pref_names
apply_prefs()
udp_table:add_for_decode_as(p_m2mp)
udp_table:add_for_decode_as(p_infra)
tcp_table:add_for_decode_as(p_backbone)
