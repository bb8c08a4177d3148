/* m2mc.native._speedups: the hot loops in C (docs/decisions.md, "The hot loops are
 * compiled from C of our own" and "One native seam"; figures in docs/group.md section 11).
 *
 * Each function is the C twin of a Python function that stays, named beside it, and
 * runs wherever this module is not built, is stale or M2MC_PURE is set; m2mc.native
 * binds the one in use. tests/native holds every pair to the same results and errors
 * on any input.
 *
 *   records        m2mc.group.codec.records_py: data records from what msgpack
 *                  decoded (no network byte parsed here), checked field by field in
 *                  the Python's order, with its DecodeError messages
 *   record_size    codec.record_size_py
 *   pack           msgpack.packb(obj, use_bin_type=True)'s bytes (m2mc.native.packb)
 *   pack_records   a Data or Repair frame's msgpack body, from its Messages
 *   put_records    m2mc.store.sqlite.SqliteStore._put_each
 *   take_messages  m2mc.api.inbox.Inbox.take's loop
 *   stream_heads   m2mc.group.node_output.NodeOutput.deliver_many's search
 *   consecutive    m2mc.native.packets.consecutive_py: the one reader of network bytes,
 *                  8-byte M2MP headers at fixed offsets inside the block
 *   fragments      m2mc.native.packets.fragment_list_py
 *   slot_builder   m2mc.native.fastobj's builders
 *
 * ABI and LAYOUT_HASH (exported) say what this file was built as: m2mc.native.layout
 * holds the same values and m2mc.native.loader refuses a build whose differ. Raise
 * M2MC_NATIVE_ABI with any change of what a function takes or returns.
 *
 * Objects are built as m2mc.fastobj builds them: a slots class allocated without its
 * __init__, each slot filled at the offset its member descriptor names, after a check
 * of the class's layout (plain_slots; anything else is refused with TypeError and
 * the caller keeps the Python). Whatever the C does not expect (a subclass, another
 * mapping, a type msgpack-in-C does not write) goes back to the Python: no loop here
 * runs code of an object it did not check.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "structmember.h"
#include <stdio.h>
#include <string.h>

/* What this build is (m2mc.native.layout: the same values). The #ifndef lets a test
 * build a stale module on purpose (tests/native/test_loader.py). */
#ifndef M2MC_NATIVE_ABI
#define M2MC_NATIVE_ABI 2
#endif
#ifndef M2MP_SEGMENT
#define M2MP_SEGMENT 508        /* m2mc.wire.packet.MAX_PACKET: one GRO segment */
#endif
#define M2MP_HEADER 8           /* HEADER_SIZE: message id, then fragment word */
#define M2MP_LAST 0x80000000UL  /* LAST_FLAG */
#define MAX_DEPTH 8             /* containers nested deeper go to msgpack (pack) */

typedef struct {
    PyTypeObject *mid_type;      /* MessageId: slots (pid, seq) */
    PyTypeObject *message_type;  /* Message: slots (mid, parent, payload, vclock, gseq) */
    PyObject *root;              /* ROOT, the MessageId of no parent */
    PyObject *decode_error;      /* m2mc.errors.DecodeError */
    PyObject *read_vclock;       /* wire_bounds.read_vclock(raw, max_seq) */
    Py_ssize_t mid_off[2];
    Py_ssize_t message_off[5];
    Py_ssize_t max_pid;
    Py_ssize_t max_list;
    PyObject *record_size_py;    /* codec.record_size_py: for what record_size leaves */
    PyTypeObject *group_message_type;  /* GroupMessage: (gid, mid, parent, data, gseq) */
    Py_ssize_t group_message_off[5];
    int classes_ready;  /* setup_classes was called */
    int records_ready;  /* and setup_records */
} State;

static State state;

/* The offset of the object slot `name` of `type`, or -1 (TypeError set). */
static Py_ssize_t
slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name);  /* borrowed */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name, name);
        return -1;
    }
    return member->offset;
}

/* Whether `type` is a plain class whose slots are exactly `names` (a tuple). */
static int
plain_slots(PyTypeObject *type, const char *const *names, Py_ssize_t count, Py_ssize_t *offsets)
{
    if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || type->tp_base != &PyBaseObject_Type
            || type->tp_dictoffset != 0 || type->tp_alloc != PyType_GenericAlloc) {
        PyErr_Format(PyExc_TypeError, "%s: not a plain slots class", type->tp_name);
        return 0;
    }
    PyObject *slots = PyDict_GetItemString(type->tp_dict, "__slots__");  /* borrowed */
    if (slots == NULL || !PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != count) {
        PyErr_Format(PyExc_TypeError, "%s: other slots than expected", type->tp_name);
        return 0;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *slot = PyTuple_GET_ITEM(slots, i);
        if (!PyUnicode_Check(slot) || PyUnicode_CompareWithASCIIString(slot, names[i]) != 0) {
            PyErr_Format(PyExc_TypeError, "%s: other slots than expected", type->tp_name);
            return 0;
        }
        offsets[i] = slot_offset(type, names[i]);
        if (offsets[i] < 0) {
            return 0;
        }
    }
    return 1;
}

static const char *const MID_SLOTS[] = {"pid", "seq"};
static const char *const MESSAGE_SLOTS[] = {"mid", "parent", "payload", "vclock", "gseq"};
static const char *const GROUP_MESSAGE_SLOTS[] = {"gid", "mid", "parent", "data", "gseq"};

/* MessageId's hash and equality in C. The dataclass's own (Python functions: the
 * hash of the tuple (pid, seq), and equality of the two tuples for two MessageIds)
 * were 4 to 5 % of a total-order member's CPU: every table of the ordering is keyed
 * by MessageId. These give the same answers (the hash is CPython's tuple hash of
 * (pid, seq), computed without the tuple; tests/native/test_mid_hash.py), and leave
 * everything else (other comparisons, other types, a slot not set) to the class's
 * own. */
static PyTypeObject *mid_patched;  /* the class they were given to (once), and its own */
static Py_ssize_t mid_patched_off[2];
static hashfunc mid_python_hash;
static richcmpfunc mid_python_richcompare;

#if SIZEOF_PY_UHASH_T > 4
#define XXPRIME_1 ((Py_uhash_t)11400714785074694791ULL)
#define XXPRIME_2 ((Py_uhash_t)14029467366897019727ULL)
#define XXPRIME_5 ((Py_uhash_t)2870177450012600261ULL)
#define XXROTATE(x) ((x << 31) | (x >> 33))
#else
#define XXPRIME_1 ((Py_uhash_t)2654435761UL)
#define XXPRIME_2 ((Py_uhash_t)2246822519UL)
#define XXPRIME_5 ((Py_uhash_t)374761393UL)
#define XXROTATE(x) ((x << 13) | (x >> 19))
#endif

static Py_hash_t
mid_hash(PyObject *self)
{
    if (!Py_IS_TYPE(self, mid_patched)) {
        return mid_python_hash(self);  /* (a subclass) */
    }
    PyObject *pid = *(PyObject **)((char *)self + mid_patched_off[0]);
    PyObject *seq = *(PyObject **)((char *)self + mid_patched_off[1]);
    if (pid == NULL || seq == NULL) {
        return mid_python_hash(self);  /* (its AttributeError) */
    }
    Py_uhash_t acc = XXPRIME_5;
    PyObject *items[2] = {pid, seq};
    for (int i = 0; i < 2; i++) {
        Py_uhash_t lane = (Py_uhash_t)PyObject_Hash(items[i]);
        if (lane == (Py_uhash_t)-1) {
            return -1;
        }
        acc += lane * XXPRIME_2;
        acc = XXROTATE(acc);
        acc *= XXPRIME_1;
    }
    acc += 2 ^ (XXPRIME_5 ^ 3527539UL);  /* the tuple's length */
    if (acc == (Py_uhash_t)-1) {
        return 1546275796;
    }
    return (Py_hash_t)acc;
}

static PyObject *
mid_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op == Py_EQ || op == Py_NE) && Py_IS_TYPE(a, mid_patched)
            && Py_IS_TYPE(b, mid_patched)) {
        PyObject *pa = *(PyObject **)((char *)a + mid_patched_off[0]);
        PyObject *sa = *(PyObject **)((char *)a + mid_patched_off[1]);
        PyObject *pb = *(PyObject **)((char *)b + mid_patched_off[0]);
        PyObject *sb = *(PyObject **)((char *)b + mid_patched_off[1]);
        if (pa != NULL && sa != NULL && pb != NULL && sb != NULL) {
            int equal = PyObject_RichCompareBool(pa, pb, Py_EQ);
            if (equal > 0) {
                equal = PyObject_RichCompareBool(sa, sb, Py_EQ);
            }
            if (equal < 0) {
                return NULL;
            }
            return PyBool_FromLong(op == Py_EQ ? equal : !equal);
        }
    }
    return mid_python_richcompare(a, b, op);
}

/* setup_classes(MessageId, Message, ROOT): the classes both loops build and read. */
static PyObject *
setup_classes(PyObject *module, PyObject *args)
{
    PyObject *mid_type, *message_type, *root;
    if (!PyArg_ParseTuple(args, "O!O!O:setup_classes", &PyType_Type, &mid_type, &PyType_Type,
                          &message_type, &root)) {
        return NULL;
    }
    Py_ssize_t mid_off[2], message_off[5];
    if (!plain_slots((PyTypeObject *)mid_type, MID_SLOTS, 2, mid_off)
            || !plain_slots((PyTypeObject *)message_type, MESSAGE_SLOTS, 5, message_off)) {
        return NULL;
    }
    if (!Py_IS_TYPE(root, (PyTypeObject *)mid_type)) {
        PyErr_SetString(PyExc_TypeError, "setup_classes: ROOT is no MessageId");
        return NULL;
    }
    Py_XSETREF(state.mid_type, (PyTypeObject *)Py_NewRef(mid_type));
    Py_XSETREF(state.message_type, (PyTypeObject *)Py_NewRef(message_type));
    Py_XSETREF(state.root, Py_NewRef(root));
    memcpy(state.mid_off, mid_off, sizeof mid_off);
    memcpy(state.message_off, message_off, sizeof message_off);
    PyTypeObject *mids = (PyTypeObject *)mid_type;
    if (mid_patched == NULL && mids->tp_hash != NULL && mids->tp_richcompare != NULL) {
        /* (the first class only: m2mc.ordering.ids binds it at import, once; a class
         * bound later, by a test, keeps its Python hash and equality) */
        mid_patched = (PyTypeObject *)Py_NewRef(mid_type);
        memcpy(mid_patched_off, mid_off, sizeof mid_off);
        mid_python_hash = mids->tp_hash;
        mid_python_richcompare = mids->tp_richcompare;
        mids->tp_hash = mid_hash;
        mids->tp_richcompare = mid_richcompare;
        PyType_Modified(mids);
    }
    state.classes_ready = 1;
    Py_RETURN_NONE;
}

/* setup_records(DecodeError, read_vclock, max_pid, max_list): what `records` checks with. */
static PyObject *
setup_records(PyObject *module, PyObject *args)
{
    PyObject *decode_error, *read_vclock;
    Py_ssize_t max_pid, max_list;
    if (!PyArg_ParseTuple(args, "OOnn:setup_records", &decode_error, &read_vclock, &max_pid,
                          &max_list)) {
        return NULL;
    }
    if (!PyCallable_Check(read_vclock) || !PyType_Check(decode_error)
            || !PyType_IsSubtype((PyTypeObject *)decode_error, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "setup_records: an exception class and a callable");
        return NULL;
    }
    Py_XSETREF(state.decode_error, Py_NewRef(decode_error));
    Py_XSETREF(state.read_vclock, Py_NewRef(read_vclock));
    state.max_pid = max_pid;
    state.max_list = max_list;
    state.records_ready = 1;
    Py_RETURN_NONE;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static PyObject *
new_mid(PyObject *pid, PyObject *seq)
{
    PyObject *mid = state.mid_type->tp_alloc(state.mid_type, 0);
    if (mid != NULL) {
        SLOT(mid, state.mid_off[0]) = Py_NewRef(pid);
        SLOT(mid, state.mid_off[1]) = Py_NewRef(seq);
    }
    return mid;
}

/* Steals none of its arguments. */
static PyObject *
new_message(PyObject *mid, PyObject *parent, PyObject *payload, PyObject *vclock,
            PyObject *gseq)
{
    PyObject *m = state.message_type->tp_alloc(state.message_type, 0);
    if (m != NULL) {
        SLOT(m, state.message_off[0]) = Py_NewRef(mid);
        SLOT(m, state.message_off[1]) = Py_NewRef(parent);
        SLOT(m, state.message_off[2]) = Py_NewRef(payload);
        SLOT(m, state.message_off[3]) = Py_NewRef(vclock);
        SLOT(m, state.message_off[4]) = Py_NewRef(gseq);
    }
    return m;
}

/* `value` as a long long if it is an int (not a bool) in low <= value < high;
 * 0 if it is an int out of that range (or beyond a long long); -1 if it is no int. */
static int
int_in(PyObject *value, long long low, long long high, long long *out)
{
    if (!PyLong_CheckExact(value)) {
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return low <= v && v < high;
}

static PyObject *
fail(const char *message)
{
    PyErr_SetString(state.decode_error, message);
    return NULL;
}

/* records(raw, max_seq) -> list[Message]: m2mc.group.codec.records_py.
 *
 * A record of 7 fields has its vector clock read by read_vclock, Python code that
 * could change or free the record or the list (a caller's list, not msgpack's): its
 * fields are copied first (a tuple that owns them), as the Python reads them before
 * that call, and the list is read at its current size each time. A record of 5 or 6
 * fields runs no Python code: its fields are read in place. */
static PyObject *
records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "records(raw, max_seq)");
        return NULL;
    }
    if (!state.classes_ready || !state.records_ready) {
        PyErr_SetString(PyExc_RuntimeError, "m2mc.native._speedups is not set up");
        return NULL;
    }
    PyObject *raw = args[0];
    int overflow = 0;
    long long max_seq = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (overflow != 0 || (max_seq == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_OverflowError, "max_seq beyond a long long");
        }
        return NULL;
    }
    if (!PyList_CheckExact(raw) || PyList_GET_SIZE(raw) > state.max_list) {
        return fail("expected a list of the right length");
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    PyObject *prev = Py_NewRef(state.root);  /* the MessageId built last */
    PyObject *prev_pid = NULL;               /* its pid and seq (none for ROOT) */
    long long prev_seq = 0;
    PyObject *held = NULL, *vclock = NULL;   /* a record of 7: its fields, its clock */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(raw); i++) {
        PyObject *r = PyList_GET_ITEM(raw, i);
        if (!PyList_CheckExact(r)) {
            fail("bad data record");
            goto error;
        }
        Py_ssize_t n = PyList_GET_SIZE(r);
        if (n != 5 && n != 6 && n != 7) {
            fail("bad data record");
            goto error;
        }
        PyObject **f = PySequence_Fast_ITEMS(r);  /* pid, seq, ppid, pseq, payload, ... */
        if (n == 7) {
            held = PyList_AsTuple(r);
            if (held == NULL) {
                goto error;
            }
            f = PySequence_Fast_ITEMS(held);
        }
        PyObject *gseq = Py_None;
        if (n >= 6 && f[5] != Py_None) {
            long long g;
            if (int_in(f[5], 1, max_seq, &g) != 1) {
                fail("integer out of range");
                goto error;
            }
            gseq = f[5];
        }
        if (n == 7) {
            PyObject *seq_arg = PyLong_FromLongLong(max_seq);
            if (seq_arg == NULL) {
                goto error;
            }
            vclock = PyObject_CallFunctionObjArgs(state.read_vclock, f[6], seq_arg, NULL);
            Py_DECREF(seq_arg);
            if (vclock == NULL) {
                goto error;
            }
        }
        PyObject *pid = f[0], *seq = f[1], *ppid = f[2], *pseq = f[3], *payload = f[4];
        long long s, ps;
        if (!PyUnicode_CheckExact(pid) || !PyLong_CheckExact(seq) || !PyUnicode_CheckExact(ppid)
                || !PyLong_CheckExact(pseq) || !PyBytes_CheckExact(payload)
                || PyUnicode_GET_LENGTH(pid) == 0 || PyUnicode_GET_LENGTH(pid) > state.max_pid
                || int_in(seq, 1, max_seq, &s) != 1
                || PyUnicode_GET_LENGTH(ppid) > state.max_pid) {
            fail("bad data record");
            goto error;
        }
        PyObject *parent;
        if (PyUnicode_GET_LENGTH(ppid) > 0) {
            if (int_in(pseq, 1, max_seq, &ps) != 1) {
                fail("bad parent seqno");
                goto error;
            }
            if (prev_pid != NULL && ps == prev_seq
                    && PyUnicode_Compare(ppid, prev_pid) == 0) {
                parent = Py_NewRef(prev);
            } else {
                parent = new_mid(ppid, pseq);
            }
        } else if (int_in(pseq, 0, 1, &ps) == 1) {  /* pseq == 0 */
            parent = Py_NewRef(state.root);
        } else {
            fail("bad parent seqno");
            goto error;
        }
        if (parent == NULL) {
            goto error;
        }
        PyObject *mid = new_mid(pid, seq);
        if (mid == NULL) {
            Py_DECREF(parent);
            goto error;
        }
        PyObject *message = new_message(mid, parent, payload, vclock ? vclock : Py_None, gseq);
        Py_DECREF(parent);
        Py_SETREF(prev, mid);
        prev_pid = pid;  /* borrowed: prev holds it */
        prev_seq = s;
        Py_CLEAR(vclock);
        Py_CLEAR(held);
        if (message == NULL || PyList_Append(out, message) < 0) {
            Py_XDECREF(message);
            goto error;
        }
        Py_DECREF(message);
    }
    Py_DECREF(prev);
    return out;
error:
    Py_XDECREF(vclock);
    Py_XDECREF(held);
    Py_DECREF(prev);
    Py_DECREF(out);
    return NULL;
}


/* ---------------------------------------------------------------- the log's puts */

/* put_records(by_pid, messages, start, delivered, written, large)
 *     -> (written, stop, saw_gseq)
 *
 * m2mc.store.sqlite.SqliteStore._put's loop from messages[start]: each message's
 * chunk record [write number, seq, ppid, pseq, payload, gseq, vclock copy, delivered]
 * into by_pid[pid][seq], a new write number (written + 1) for a seq not there yet.
 * It stops at the first message it leaves to the Python (stop < len(messages)): one
 * whose payload is ``large`` bytes or more (written to a payload file first) or
 * which is not a plain Message of bytes, a str pid, an int seq and a dict or no
 * vclock. saw_gseq: some record had a gseq. */
static PyObject *
put_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "put_records(by_pid, messages, start, delivered, written, large)");
        return NULL;
    }
    /* (no classes set up: state.message_type is NULL, no message is one, it stops at
     * the first and the Python puts them all) */
    PyObject *by_pid = args[0], *messages = args[1], *delivered = args[3];
    if (!PyDict_CheckExact(by_pid) || !(PyList_CheckExact(messages) || PyTuple_CheckExact(messages))) {
        PyErr_SetString(PyExc_TypeError, "put_records: a dict and a list or tuple");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long long written = PyLong_AsLongLong(args[4]);
    if (written == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t large = PyLong_AsSsize_t(args[5]);
    if (large == -1 && PyErr_Occurred()) {
        return NULL;
    }
    int saw_gseq = 0;
    PyObject *records = NULL, *records_of = NULL;  /* borrowed: by_pid holds them */
    Py_ssize_t i = start < 0 ? 0 : start;
    for (; i < PySequence_Fast_GET_SIZE(messages); i++) {
        PyObject *m = PySequence_Fast_GET_ITEM(messages, i);
        if (!Py_IS_TYPE(m, state.message_type)) {
            break;
        }
        PyObject *mid = SLOT(m, state.message_off[0]), *parent = SLOT(m, state.message_off[1]);
        PyObject *payload = SLOT(m, state.message_off[2]);
        PyObject *vclock = SLOT(m, state.message_off[3]), *gseq = SLOT(m, state.message_off[4]);
        if (mid == NULL || parent == NULL || payload == NULL || vclock == NULL || gseq == NULL
                || !Py_IS_TYPE(mid, state.mid_type) || !Py_IS_TYPE(parent, state.mid_type)
                || !PyBytes_CheckExact(payload) || PyBytes_GET_SIZE(payload) >= large) {
            break;
        }
        PyObject *pid = SLOT(mid, state.mid_off[0]), *seq = SLOT(mid, state.mid_off[1]);
        PyObject *ppid = SLOT(parent, state.mid_off[0]), *pseq = SLOT(parent, state.mid_off[1]);
        if (pid == NULL || seq == NULL || ppid == NULL || pseq == NULL
                || !PyUnicode_CheckExact(pid) || !PyLong_CheckExact(seq)
                || !(vclock == Py_None || PyDict_CheckExact(vclock))) {
            break;  /* (so no code of another type's runs in this loop) */
        }
        if (records == NULL || records_of != pid) {
            int same = 0;
            if (records_of != NULL) {
                same = PyObject_RichCompareBool(pid, records_of, Py_EQ);
                if (same < 0) {
                    return NULL;
                }
            }
            if (!same) {
                records = PyDict_GetItemWithError(by_pid, pid);
                if (records == NULL) {
                    if (PyErr_Occurred()) {
                        return NULL;
                    }
                    PyObject *fresh = PyDict_New();
                    if (fresh == NULL || PyDict_SetItem(by_pid, pid, fresh) < 0) {
                        Py_XDECREF(fresh);
                        return NULL;
                    }
                    Py_DECREF(fresh);  /* by_pid holds it */
                    records = fresh;
                } else if (!PyDict_CheckExact(records)) {
                    break;
                }
            }
            records_of = pid;
        }
        PyObject *earlier = PyDict_GetItemWithError(records, seq);
        PyObject *n;
        if (earlier == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            n = PyLong_FromLongLong(written + 1);
            if (n == NULL) {
                return NULL;
            }
            written += 1;
        } else if (PyList_CheckExact(earlier) && PyList_GET_SIZE(earlier) > 0) {
            n = Py_NewRef(PyList_GET_ITEM(earlier, 0));
        } else {
            break;
        }
        PyObject *clock;
        if (vclock == Py_None) {
            clock = Py_NewRef(Py_None);
        } else {
            clock = PyDict_Copy(vclock);
            if (clock == NULL) {
                Py_DECREF(n);
                return NULL;
            }
        }
        if (gseq != Py_None) {
            saw_gseq = 1;
        }
        PyObject *record = PyList_New(8);
        if (record == NULL) {
            Py_DECREF(n);
            Py_DECREF(clock);
            return NULL;
        }
        PyList_SET_ITEM(record, 0, n);
        PyList_SET_ITEM(record, 1, Py_NewRef(seq));
        PyList_SET_ITEM(record, 2, Py_NewRef(ppid));
        PyList_SET_ITEM(record, 3, Py_NewRef(pseq));
        PyList_SET_ITEM(record, 4, Py_NewRef(payload));
        PyList_SET_ITEM(record, 5, Py_NewRef(gseq));
        PyList_SET_ITEM(record, 6, clock);
        PyList_SET_ITEM(record, 7, Py_NewRef(delivered));
        int failed = PyDict_SetItem(records, seq, record);
        Py_DECREF(record);
        if (failed < 0) {
            return NULL;
        }
    }
    return Py_BuildValue("(LnN)", written, i, PyBool_FromLong(saw_gseq));
}


/* ---------------------------------------------------------------- delivery */

/* stream_heads(messages, magic) -> list | None: the messages of the list whose payload
 * starts with `magic` (stream heads), in order; None if one is not a plain Message of
 * bytes (the caller's listcomp then answers). */
static PyObject *
stream_heads(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !PyBytes_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "stream_heads(list, bytes)");
        return NULL;
    }
    /* (no classes set up: no message is a Message, and the answer is None) */
    PyObject *messages = args[0];
    const char *magic = PyBytes_AS_STRING(args[1]);
    Py_ssize_t magic_len = PyBytes_GET_SIZE(args[1]);
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(messages); i++) {
        PyObject *m = PyList_GET_ITEM(messages, i);
        PyObject *payload = Py_IS_TYPE(m, state.message_type)
            ? SLOT(m, state.message_off[2]) : NULL;
        if (payload == NULL || !PyBytes_CheckExact(payload)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        if (PyBytes_GET_SIZE(payload) >= magic_len
                && memcmp(PyBytes_AS_STRING(payload), magic, (size_t)magic_len) == 0
                && PyList_Append(out, m) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* setup_group_message(GroupMessage): the class `take_messages` builds. */
static PyObject *
setup_group_message(PyObject *module, PyObject *type)
{
    Py_ssize_t offsets[5];
    if (!PyType_Check(type)
            || !plain_slots((PyTypeObject *)type, GROUP_MESSAGE_SLOTS, 5, offsets)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "setup_group_message(GroupMessage)");
        }
        return NULL;
    }
    Py_XSETREF(state.group_message_type, (PyTypeObject *)Py_NewRef(type));
    memcpy(state.group_message_off, offsets, sizeof offsets);
    Py_RETURN_NONE;
}

/* take_messages(messages, count, gid, out) -> taken: m2mc.api.inbox.Inbox.take's loop.
 * Pops up to `count` Messages off the deque `messages` and appends each to the list
 * `out` as a GroupMessage of group `gid`; stops early (putting it back) at anything
 * else (an own message, kept as a tuple: the Python's to make). */
static PyObject *
take_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyUnicode_CheckExact(args[2]) || !PyList_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "take_messages(deque, count, gid: str, out: list)");
        return NULL;
    }
    if (!state.classes_ready || state.group_message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "m2mc.native._speedups is not set up");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *gid = args[2], *out = args[3];
    PyObject *popleft = PyObject_GetAttrString(args[0], "popleft");
    if (popleft == NULL) {
        return NULL;
    }
    Py_ssize_t taken = 0;
    for (; taken < count; taken++) {
        PyObject *m = PyObject_CallNoArgs(popleft);
        if (m == NULL) {
            Py_DECREF(popleft);
            return NULL;
        }
        PyObject *mid = NULL, *parent = NULL, *payload = NULL, *gseq = NULL;
        if (Py_IS_TYPE(m, state.message_type)) {
            mid = SLOT(m, state.message_off[0]);
            parent = SLOT(m, state.message_off[1]);
            payload = SLOT(m, state.message_off[2]);
            gseq = SLOT(m, state.message_off[4]);
        }
        if (mid == NULL || parent == NULL || payload == NULL || gseq == NULL) {
            PyObject *appendleft = PyObject_GetAttrString(args[0], "appendleft");
            PyObject *back = appendleft == NULL ? NULL : PyObject_CallOneArg(appendleft, m);
            Py_XDECREF(appendleft);
            Py_DECREF(m);
            Py_DECREF(popleft);
            if (back == NULL) {
                return NULL;
            }
            Py_DECREF(back);
            return PyLong_FromSsize_t(taken);
        }
        PyTypeObject *type = state.group_message_type;
        PyObject *g = type->tp_alloc(type, 0);
        if (g == NULL) {
            Py_DECREF(m);
            Py_DECREF(popleft);
            return NULL;
        }
        SLOT(g, state.group_message_off[0]) = Py_NewRef(gid);
        SLOT(g, state.group_message_off[1]) = Py_NewRef(mid);
        SLOT(g, state.group_message_off[2]) = Py_NewRef(parent);
        SLOT(g, state.group_message_off[3]) = Py_NewRef(payload);
        SLOT(g, state.group_message_off[4]) = Py_NewRef(gseq);
        Py_DECREF(m);
        int failed = PyList_Append(out, g);
        Py_DECREF(g);
        if (failed < 0) {
            Py_DECREF(popleft);
            return NULL;
        }
    }
    Py_DECREF(popleft);
    return PyLong_FromSsize_t(taken);
}


/* ---------------------------------------------------------------- msgpack, written
 *
 * The bytes msgpack.packb(obj, use_bin_type=True) makes, for the few types our hot
 * frames and log rows hold: None, bool, int (64 bits), str, bytes, list, tuple and
 * dict. Anything else (or nested deeper than MAX_DEPTH) makes the writer give up,
 * and the caller packs with msgpack itself; tests/group/test_speedups.py holds the
 * two to the same bytes. */

typedef struct {
    char *data;
    Py_ssize_t size, used;
    int failed;  /* 1: a type it does not write (give up); -1: out of memory */
} Writer;

/* Room for `more` bytes (1), or 0 with w->failed = -1: out of memory, or more than a
 * Py_ssize_t counts (on a 32-bit build a few containers of long strings get there). */
static int
reserve(Writer *w, Py_ssize_t more)
{
    if (more < 0 || more > PY_SSIZE_T_MAX - w->used) {
        w->failed = -1;
        return 0;
    }
    Py_ssize_t need = w->used + more;
    if (need <= w->size) {
        return 1;
    }
    Py_ssize_t size = w->size ? w->size : 256;
    while (size < need) {
        size = size > PY_SSIZE_T_MAX / 2 ? need : size * 2;
    }
    char *data = PyMem_Realloc(w->data, (size_t)size);
    if (data == NULL) {
        w->failed = -1;
        return 0;
    }
    w->data = data;
    w->size = size;
    return 1;
}

static void
put_byte(Writer *w, unsigned char b)
{
    if (reserve(w, 1)) {
        w->data[w->used++] = (char)b;
    }
}

static void
put_be(Writer *w, unsigned char head, unsigned long long v, int bytes)
{
    if (!reserve(w, 1 + bytes)) {
        return;
    }
    w->data[w->used++] = (char)head;
    for (int i = bytes - 1; i >= 0; i--) {
        w->data[w->used++] = (char)((v >> (8 * i)) & 0xff);
    }
}

static void
put_uint(Writer *w, unsigned long long v)
{
    if (v < 0x80) {
        put_byte(w, (unsigned char)v);
    } else if (v <= 0xff) {
        put_be(w, 0xcc, v, 1);
    } else if (v <= 0xffff) {
        put_be(w, 0xcd, v, 2);
    } else if (v <= 0xffffffffULL) {
        put_be(w, 0xce, v, 4);
    } else {
        put_be(w, 0xcf, v, 8);
    }
}

static void
put_int(Writer *w, long long v)
{
    if (v >= 0) {
        put_uint(w, (unsigned long long)v);
    } else if (v >= -32) {
        put_byte(w, (unsigned char)(0xe0 | (v + 32)));
    } else if (v >= -128) {
        put_be(w, 0xd0, (unsigned long long)v, 1);
    } else if (v >= -32768) {
        put_be(w, 0xd1, (unsigned long long)v, 2);
    } else if (v >= -2147483648LL) {
        put_be(w, 0xd2, (unsigned long long)v, 4);
    } else {
        put_be(w, 0xd3, (unsigned long long)v, 8);
    }
}

static void
put_head(Writer *w, Py_ssize_t n, unsigned char fix, unsigned char fix_limit,
         unsigned char h8, unsigned char h16, unsigned char h32)
{
    if (n < fix_limit) {
        put_byte(w, (unsigned char)(fix | n));
    } else if (h8 && n <= 0xff) {
        put_be(w, h8, (unsigned long long)n, 1);
    } else if (n <= 0xffff) {
        put_be(w, h16, (unsigned long long)n, 2);
    } else {
        put_be(w, h32, (unsigned long long)n, 4);
    }
}

static void
put_raw(Writer *w, const char *data, Py_ssize_t n)
{
    if (reserve(w, n)) {
        memcpy(w->data + w->used, data, (size_t)n);
        w->used += n;
    }
}

static void
put_str(Writer *w, PyObject *s)
{
    Py_ssize_t n;
    const char *data = PyUnicode_AsUTF8AndSize(s, &n);
    if (data == NULL) {
        PyErr_Clear();  /* (a lone surrogate: msgpack raises; let it) */
        w->failed = 1;
        return;
    }
    if (n > 0xffffffffLL) {
        w->failed = 1;
        return;
    }
    put_head(w, n, 0xa0, 32, 0xd9, 0xda, 0xdb);
    put_raw(w, data, n);
}

static void
put_bytes(Writer *w, PyObject *b)
{
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    if (n > 0xffffffffLL) {
        w->failed = 1;
        return;
    }
    if (n <= 0xff) {
        put_be(w, 0xc4, (unsigned long long)n, 1);
    } else if (n <= 0xffff) {
        put_be(w, 0xc5, (unsigned long long)n, 2);
    } else {
        put_be(w, 0xc6, (unsigned long long)n, 4);
    }
    put_raw(w, PyBytes_AS_STRING(b), n);
}

static void put_obj(Writer *w, PyObject *o, int depth);

static void
put_items(Writer *w, PyObject *const *items, Py_ssize_t n, int depth)
{
    if ((unsigned long long)n > 0xffffffffULL) {
        w->failed = 1;  /* (msgpack refuses it; let it) */
        return;
    }
    put_head(w, n, 0x90, 16, 0, 0xdc, 0xdd);
    for (Py_ssize_t i = 0; i < n && !w->failed; i++) {
        put_obj(w, items[i], depth + 1);
    }
}

static void
put_obj(Writer *w, PyObject *o, int depth)
{
    if (w->failed) {
        return;
    }
    if (depth > MAX_DEPTH) {
        w->failed = 1;
    } else if (o == Py_None) {
        put_byte(w, 0xc0);
    } else if (o == Py_True) {
        put_byte(w, 0xc3);
    } else if (o == Py_False) {
        put_byte(w, 0xc2);
    } else if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(o);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                w->failed = 1;  /* beyond 64 bits: msgpack raises; let it */
            } else {
                put_uint(w, u);
            }
        } else if (overflow < 0) {
            w->failed = 1;
        } else {
            put_int(w, v);
        }
    } else if (PyUnicode_CheckExact(o)) {
        put_str(w, o);
    } else if (PyBytes_CheckExact(o)) {
        put_bytes(w, o);
    } else if (PyList_CheckExact(o)) {
        /* (a list may not change while it is written: nothing here runs Python code) */
        put_items(w, ((PyListObject *)o)->ob_item, PyList_GET_SIZE(o), depth);
    } else if (PyTuple_CheckExact(o)) {
        put_items(w, ((PyTupleObject *)o)->ob_item, PyTuple_GET_SIZE(o), depth);
    } else if (PyDict_CheckExact(o)) {
        Py_ssize_t pos = 0, n = PyDict_GET_SIZE(o);
        PyObject *key, *value;
        if ((unsigned long long)n > 0xffffffffULL) {
            w->failed = 1;
            return;
        }
        put_head(w, n, 0x80, 16, 0, 0xde, 0xdf);
        while (!w->failed && PyDict_Next(o, &pos, &key, &value)) {
            put_obj(w, key, depth + 1);
            put_obj(w, value, depth + 1);
        }
    } else {
        w->failed = 1;
    }
}

/* The writer's bytes (freeing it), None if it gave up, NULL if out of memory. */
static PyObject *
finish(Writer *w)
{
    PyObject *out;
    if (w->failed < 0) {
        out = PyErr_NoMemory();
    } else if (w->failed) {
        out = Py_NewRef(Py_None);
    } else {
        out = PyBytes_FromStringAndSize(w->data, w->used);
    }
    PyMem_Free(w->data);
    return out;
}

/* pack(obj) -> bytes | None: msgpack.packb(obj, use_bin_type=True), or None for
 * anything it does not write (the caller then asks msgpack). */
static PyObject *
pack(PyObject *module, PyObject *obj)
{
    Writer w = {0};
    put_obj(&w, obj, 0);
    return finish(&w);
}

/* pack_records(sender, messages) -> bytes | None: the body of a Data or Repair frame,
 * msgpack of [sender, [record_wire(m) for m in messages]] (m2mc.group.codec), written
 * straight from the Messages; None if a message is not a plain Message (with a dict or
 * no vclock) or holds what pack does not write. */
static PyObject *
pack_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "pack_records(sender, messages)");
        return NULL;
    }
    if (!PyUnicode_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        Py_RETURN_NONE;  /* (msgpack writes, or refuses, whatever else it is) */
    }
    if (!state.classes_ready) {
        Py_RETURN_NONE;  /* (packb writes it) */
    }
    PyObject *messages = args[1];
    Py_ssize_t n = PyList_GET_SIZE(messages);
    Writer w = {0};
    put_byte(&w, 0x92);
    put_str(&w, args[0]);
    put_head(&w, n, 0x90, 16, 0, 0xdc, 0xdd);
    for (Py_ssize_t i = 0; i < n && !w.failed; i++) {
        PyObject *m = PyList_GET_ITEM(messages, i);
        if (!Py_IS_TYPE(m, state.message_type)) {
            w.failed = 1;
            break;
        }
        PyObject *mid = SLOT(m, state.message_off[0]), *parent = SLOT(m, state.message_off[1]);
        PyObject *payload = SLOT(m, state.message_off[2]);
        PyObject *vclock = SLOT(m, state.message_off[3]), *gseq = SLOT(m, state.message_off[4]);
        if (mid == NULL || parent == NULL || payload == NULL || vclock == NULL || gseq == NULL
                || !Py_IS_TYPE(mid, state.mid_type) || !Py_IS_TYPE(parent, state.mid_type)) {
            w.failed = 1;
            break;
        }
        PyObject *fields[7] = {SLOT(mid, state.mid_off[0]), SLOT(mid, state.mid_off[1]),
                               SLOT(parent, state.mid_off[0]), SLOT(parent, state.mid_off[1]),
                               payload, gseq, vclock};
        for (int f = 0; f < 4; f++) {
            if (fields[f] == NULL) {
                w.failed = 1;
            }
        }
        if (w.failed) {
            break;
        }
        /* record_wire: 7 fields with a vclock (a dict of it), 6 with a gseq, else 5 */
        if (vclock != Py_None && !PyDict_CheckExact(vclock)) {
            w.failed = 1;  /* (another Mapping: record_wire makes a dict of it) */
            break;
        }
        Py_ssize_t count = vclock != Py_None ? 7 : gseq != Py_None ? 6 : 5;
        put_items(&w, fields, count, 1);
    }
    return finish(&w);
}


/* ---------------------------------------------------------------- slot builders
 *
 * slot_builder(cls, names) -> builder: m2mc.fastobj's fast constructor in C. Calling
 * builder(a0, a1, ...) allocates a `cls` without running its __init__ and fills its
 * slots `names` (all of them, in the order the class declares them) with the
 * arguments, positionally. TypeError for a class that is not a plain slots class with
 * exactly those slots. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *cls;
    Py_ssize_t count;
    Py_ssize_t offsets[16];
} SlotBuilder;

static PyObject *
slot_builder_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    SlotBuilder *b = (SlotBuilder *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != b->count || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)) {
        PyErr_Format(PyExc_TypeError, "%s builder takes %zd positional arguments, got %zd",
                     b->cls->tp_name, b->count, nargs);
        return NULL;
    }
    if (b->cls == NULL) {  /* (cleared by the garbage collector: in a cycle being freed) */
        PyErr_SetString(PyExc_TypeError, "a cleared builder");
        return NULL;
    }
    PyObject *o = b->cls->tp_alloc(b->cls, 0);
    if (o != NULL) {
        for (Py_ssize_t i = 0; i < nargs; i++) {
            SLOT(o, b->offsets[i]) = Py_NewRef(args[i]);
        }
    }
    return o;
}

/* A builder holds its class, and the class (or its module) may hold the builder: the
 * garbage collector sees the reference, so such a cycle is freed. */
static int
slot_builder_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((SlotBuilder *)self)->cls);
    return 0;
}

static int
slot_builder_clear(PyObject *self)
{
    Py_CLEAR(((SlotBuilder *)self)->cls);
    return 0;
}

static void
slot_builder_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    slot_builder_clear(self);
    PyObject_GC_Del(self);
}

static PyTypeObject SlotBuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "m2mc.native._speedups.SlotBuilder",
    .tp_basicsize = sizeof(SlotBuilder),
    .tp_dealloc = slot_builder_dealloc,
    .tp_traverse = slot_builder_traverse,
    .tp_clear = slot_builder_clear,
    .tp_vectorcall_offset = offsetof(SlotBuilder, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A fast constructor of one slots class (m2mc.native.fastobj).",
};

static PyObject *
slot_builder(PyObject *module, PyObject *args)
{
    PyObject *cls, *names;
    if (!PyArg_ParseTuple(args, "O!O!:slot_builder", &PyType_Type, &cls, &PyTuple_Type,
                          &names)) {
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    if (count > 16) {
        PyErr_SetString(PyExc_TypeError, "slot_builder: more than 16 slots");
        return NULL;
    }
    const char *cnames[16];
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        cnames[i] = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (cnames[i] == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "slot_builder: names must be str");
            }
            return NULL;
        }
    }
    Py_ssize_t offsets[16];
    if (!plain_slots((PyTypeObject *)cls, cnames, count, offsets)) {
        return NULL;
    }
    SlotBuilder *b = PyObject_GC_New(SlotBuilder, &SlotBuilderType);
    if (b == NULL) {
        return NULL;
    }
    b->vectorcall = slot_builder_call;
    b->cls = (PyTypeObject *)Py_NewRef(cls);
    b->count = count;
    memcpy(b->offsets, offsets, sizeof offsets);
    PyObject_GC_Track((PyObject *)b);
    return (PyObject *)b;
}


/* ---------------------------------------------------------------- record sizes */

static long long
uint_size(PyObject *v, int *ok)
{
    if (!PyLong_CheckExact(v)) {
        *ok = 0;
        return 0;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0) {
        return overflow > 0 ? 9 : 1;
    }
    return x < 128 ? 1 : x < 256 ? 2 : x < 65536 ? 3 : x < 4294967296LL ? 5 : 9;
}

/* record_size(m) -> int: m2mc.group.codec.record_size, for a plain Message of bytes
 * with int seqnos and a dict or no vclock; anything else goes to the Python given to
 * setup_record_size. */
static PyObject *
record_size(PyObject *module, PyObject *m)
{
    if (state.record_size_py == NULL || !state.classes_ready) {
        PyErr_SetString(PyExc_RuntimeError, "m2mc.native._speedups is not set up");
        return NULL;
    }
    int ok = Py_IS_TYPE(m, state.message_type);
    PyObject *mid = NULL, *parent = NULL, *payload = NULL, *vclock = NULL, *gseq = NULL;
    if (ok) {
        mid = SLOT(m, state.message_off[0]);
        parent = SLOT(m, state.message_off[1]);
        payload = SLOT(m, state.message_off[2]);
        vclock = SLOT(m, state.message_off[3]);
        gseq = SLOT(m, state.message_off[4]);
        ok = mid != NULL && parent != NULL && payload != NULL && vclock != NULL && gseq != NULL
             && Py_IS_TYPE(mid, state.mid_type) && Py_IS_TYPE(parent, state.mid_type)
             && PyBytes_CheckExact(payload);
    }
    PyObject *pid = NULL, *ppid = NULL;
    if (ok) {
        pid = SLOT(mid, state.mid_off[0]);
        ppid = SLOT(parent, state.mid_off[0]);
        ok = pid != NULL && ppid != NULL && PyUnicode_CheckExact(pid)
             && PyUnicode_CheckExact(ppid) && SLOT(mid, state.mid_off[1]) != NULL
             && SLOT(parent, state.mid_off[1]) != NULL
             && (vclock == Py_None || PyDict_CheckExact(vclock));
    }
    long long size = 0;
    if (ok) {
        size = PyBytes_GET_SIZE(payload);
        size += size < 256 ? 2 : size < 65536 ? 3 : 5;
        size += 3 + PyUnicode_GET_LENGTH(pid) + PyUnicode_GET_LENGTH(ppid);
        size += uint_size(SLOT(mid, state.mid_off[1]), &ok);
        size += uint_size(SLOT(parent, state.mid_off[1]), &ok);
        if (gseq != Py_None) {
            size += uint_size(gseq, &ok);
        }
    }
    if (ok && vclock != Py_None) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        size += 3;
        while (ok && PyDict_Next(vclock, &pos, &key, &value)) {
            ok = PyUnicode_CheckExact(key);
            if (ok) {
                size += PyUnicode_GET_LENGTH(key) + 1 + uint_size(value, &ok);
            }
        }
    }
    if (!ok) {
        return PyObject_CallOneArg(state.record_size_py, m);
    }
    return PyLong_FromLongLong(size);
}

static PyObject *
setup_record_size(PyObject *module, PyObject *fallback)
{
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "setup_record_size(callable)");
        return NULL;
    }
    Py_XSETREF(state.record_size_py, Py_NewRef(fallback));
    Py_RETURN_NONE;
}


/* ---------------------------------------------------------------- M2MP runs */

static unsigned long
be32(const unsigned char *p)
{
    return ((unsigned long)p[0] << 24) | ((unsigned long)p[1] << 16)
           | ((unsigned long)p[2] << 8) | (unsigned long)p[3];
}

/* consecutive(block, count, message_id, word) -> int: m2mc.wire.segments.consecutive.
 * Whether the `count` packets of the joined GRO block (M2MP_SEGMENT bytes each but
 * the last), the first of which has the header (message_id, word), are fragments
 * word, word + 1, ... of that message: 1 if so and the final one is the message's
 * last, 0 if so and none is, -1 if not (or the final packet is shorter than a
 * header). Every read is of a header inside the block. */
static PyObject *
consecutive(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "consecutive(block: bytes, count, message_id, word)");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    unsigned long long message_id = PyLong_AsUnsignedLongLong(args[2]);
    if (message_id == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    unsigned long long word = PyLong_AsUnsignedLongLong(args[3]);
    if (word == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    if (count < 1) {
        PyErr_SetString(PyExc_ValueError, "consecutive: count must be at least 1");
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    if ((count - 1) > (PY_SSIZE_T_MAX - M2MP_HEADER) / M2MP_SEGMENT) {
        return PyLong_FromLong(-1);
    }
    Py_ssize_t full = (count - 1) * M2MP_SEGMENT;
    unsigned long long end = word + (unsigned long long)count - 1;
    if (size - full < M2MP_HEADER || end >= M2MP_LAST || word >= M2MP_LAST) {
        return PyLong_FromLong(-1);
    }
    for (Py_ssize_t i = 0; i < count - 1; i++) {
        const unsigned char *h = data + i * M2MP_SEGMENT;
        if (be32(h) != message_id || be32(h + 4) != word + (unsigned long long)i) {
            return PyLong_FromLong(-1);
        }
    }
    const unsigned char *h = data + full;
    if (be32(h) != message_id) {
        return PyLong_FromLong(-1);
    }
    unsigned long long final = be32(h + 4);
    if (final == end) {
        return PyLong_FromLong(0);
    }
    return PyLong_FromLong(final == (end | M2MP_LAST) ? 1 : -1);
}

/* fragments(message_id, payload) -> list[bytes] | None: m2mc.wire.packet.fragment_list,
 * the packets of one message in fragment order: each an 8-byte header (message id,
 * then the fragment number with the last flag on the final one) and up to
 * M2MP_SEGMENT - M2MP_HEADER bytes of the payload (an empty payload is one packet of
 * a header alone). None where the Python raises (a message id that is not an int of
 * 32 bits, a payload that is not a buffer, more fragments than a header numbers), so
 * that it raises its own error. */
static PyObject *
fragments(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "fragments(message_id, payload)");
        return NULL;
    }
    if (!PyLong_CheckExact(args[0])) {
        Py_RETURN_NONE;
    }
    unsigned long long message_id = PyLong_AsUnsignedLongLong(args[0]);
    if (message_id == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();  /* negative or too large: the Python's struct.error */
        Py_RETURN_NONE;
    }
    if (message_id > 0xFFFFFFFFULL) {
        Py_RETURN_NONE;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const Py_ssize_t room = M2MP_SEGMENT - M2MP_HEADER;
    Py_ssize_t size = view.len;
    Py_ssize_t count = size == 0 ? 1 : (size - 1) / room + 1;
    if ((unsigned long long)(count - 1) >= M2MP_LAST) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const char *data = (const char *)view.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t offset = i * room;
        Py_ssize_t length = i == count - 1 ? size - offset : room;
        PyObject *packet = PyBytes_FromStringAndSize(NULL, M2MP_HEADER + length);
        if (packet == NULL) {
            Py_DECREF(out);
            PyBuffer_Release(&view);
            return NULL;
        }
        unsigned char *p = (unsigned char *)PyBytes_AS_STRING(packet);
        unsigned long long word = (unsigned long long)i | (i == count - 1 ? M2MP_LAST : 0);
        for (int k = 0; k < 4; k++) {
            p[k] = (unsigned char)(message_id >> (24 - 8 * k));
            p[4 + k] = (unsigned char)(word >> (24 - 8 * k));
        }
        if (length) {
            memcpy(p + M2MP_HEADER, data + offset, (size_t)length);
        }
        PyList_SET_ITEM(out, i, packet);
    }
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"setup_classes", setup_classes, METH_VARARGS,
     "setup_classes(MessageId, Message, ROOT): the classes both loops build and read "
     "(TypeError if they are not plain slots classes of the expected fields)."},
    {"setup_records", setup_records, METH_VARARGS,
     "setup_records(DecodeError, read_vclock, max_pid, max_list): what `records` "
     "raises and checks with."},
    {"records", (PyCFunction)(void (*)(void))records, METH_FASTCALL,
     "records(raw, max_seq): m2mc.group.codec's _records, in C."},
    {"put_records", (PyCFunction)(void (*)(void))put_records, METH_FASTCALL,
     "put_records(by_pid, messages, start, delivered, written, large) -> "
     "(written, stop, saw_gseq): m2mc.store.sqlite's _put loop, in C, up to the first "
     "message it leaves to the Python (stop)."},
    {"stream_heads", (PyCFunction)(void (*)(void))stream_heads, METH_FASTCALL,
     "stream_heads(messages, magic) -> list | None: the messages whose payload starts "
     "with magic (None: not all plain Messages)."},
    {"record_size", record_size, METH_O,
     "record_size(m) -> int: m2mc.group.codec.record_size, in C."},
    {"setup_record_size", setup_record_size, METH_O,
     "setup_record_size(python): the Python record_size for what the C leaves."},
    {"consecutive", (PyCFunction)(void (*)(void))consecutive, METH_FASTCALL,
     "consecutive(block, count, message_id, word) -> int: m2mc.wire.segments.consecutive, "
     "in C."},
    {"fragments", (PyCFunction)(void (*)(void))fragments, METH_FASTCALL,
     "fragments(message_id, payload) -> list | None: m2mc.wire.packet.fragment_list, "
     "in C (None: the Python raises)."},
    {"slot_builder", slot_builder, METH_VARARGS,
     "slot_builder(cls, names) -> builder: builder(*values) makes a cls without its "
     "__init__, its slots `names` (all, in order) set to the values."},
    {"pack", pack, METH_O,
     "pack(obj) -> bytes | None: msgpack.packb(obj, use_bin_type=True) for None, bool, "
     "int, str, bytes, list, tuple and dict; None for anything else."},
    {"pack_records", (PyCFunction)(void (*)(void))pack_records, METH_FASTCALL,
     "pack_records(sender, messages) -> bytes | None: the msgpack body of a Data or "
     "Repair frame, from the Messages (None: not all plain)."},
    {"setup_group_message", setup_group_message, METH_O,
     "setup_group_message(GroupMessage): the class take_messages builds."},
    {"take_messages", (PyCFunction)(void (*)(void))take_messages, METH_FASTCALL,
     "take_messages(deque, count, gid, out) -> taken: m2mc.api.inbox.Inbox.take's loop, "
     "up to the first item that is not a Message."},
    {NULL, NULL, 0, NULL},
};

/* ---------------------------------------------------------------- the module */

/* The layout as one line of text, as m2mc.native.layout.layout_text writes it. */
static int
join_slots(char *out, size_t room, const char *label, const char *const *names, int count)
{
    size_t used = strlen(out);
    int n = snprintf(out + used, room - used, "%s:", label);
    for (int i = 0; n >= 0 && (size_t)n < room - used && i < count; i++) {
        used += (size_t)n;
        n = snprintf(out + used, room - used, i ? ",%s" : "%s", names[i]);
    }
    return n >= 0 && (size_t)n < room - used;
}

static int
layout_text(char *out, size_t room)
{
    int n = snprintf(out, room, "m2mp:%d,%d,%lu;", M2MP_SEGMENT, M2MP_HEADER, M2MP_LAST);
    if (n < 0 || (size_t)n >= room
            || !join_slots(out, room, "MessageId", MID_SLOTS, 2)
            || !join_slots(out, room, ";Message", MESSAGE_SLOTS, 5)
            || !join_slots(out, room, ";GroupMessage", GROUP_MESSAGE_SLOTS, 5)) {
        return 0;
    }
    size_t used = strlen(out);
    n = snprintf(out + used, room - used, ";pack:%d", MAX_DEPTH);
    return n >= 0 && (size_t)n < room - used;
}

/* FNV-1a, 64 bits (m2mc.native.layout.fnv1a64). */
static unsigned long long
fnv1a64(const char *text)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        h = (h ^ *p) * 0x100000001b3ULL;
    }
    return h;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "m2mc.native._speedups",
    "m2mc's hot loops in C; m2mc.native binds them (or the Python) once.", -1, methods,
};

/* Adds `value` (a new reference, or NULL: an error already set) as `name`; 0 or -1. */
static int
add_new(PyObject *module, const char *name, PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    int failed = PyModule_AddObjectRef(module, name, value);
    Py_DECREF(value);
    return failed;
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    char layout[256] = "";
    if (!layout_text(layout, sizeof layout)) {
        PyErr_SetString(PyExc_SystemError, "m2mc.native._speedups: layout text too long");
        return NULL;
    }
    if (PyType_Ready(&SlotBuilderType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "ABI", M2MC_NATIVE_ABI) < 0
            || PyModule_AddIntConstant(module, "M2MP_SEGMENT", M2MP_SEGMENT) < 0
            || PyModule_AddIntConstant(module, "M2MP_HEADER", M2MP_HEADER) < 0
            || add_new(module, "M2MP_LAST", PyLong_FromUnsignedLong(M2MP_LAST)) < 0
            || PyModule_AddStringConstant(module, "LAYOUT", layout) < 0
            || add_new(module, "LAYOUT_HASH", PyLong_FromUnsignedLongLong(fnv1a64(layout))) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
