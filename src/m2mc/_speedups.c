/* m2mc._speedups: the receivers' hot loop in C (docs/group.md section 11).
 *
 * `records` is m2mc.group.codec's pure-Python `_records`, record for record: it takes
 * what msgpack already decoded (so no byte of the network is parsed here), checks
 * each data record exactly as the Python does, in the same order and with the same
 * DecodeError messages, and builds the very same MessageId and Message objects.
 * tests/group/test_speedups.py holds the two to the same behaviour on any input.
 *
 * The objects are built as m2mc.fastobj builds them: a slots dataclass allocated
 * without its __init__, each slot filled through the offset its member descriptor
 * names. `setup` checks the classes' layout first and refuses (TypeError) anything
 * else, and the caller then keeps the pure-Python loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "structmember.h"

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
    int ready;
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

static PyObject *
setup(PyObject *module, PyObject *args)
{
    PyObject *mid_type, *message_type, *root, *decode_error, *read_vclock;
    Py_ssize_t max_pid, max_list;
    if (!PyArg_ParseTuple(args, "O!O!OOOnn:setup", &PyType_Type, &mid_type, &PyType_Type,
                          &message_type, &root, &decode_error, &read_vclock, &max_pid,
                          &max_list)) {
        return NULL;
    }
    State fresh = {0};
    if (!plain_slots((PyTypeObject *)mid_type, MID_SLOTS, 2, fresh.mid_off)
            || !plain_slots((PyTypeObject *)message_type, MESSAGE_SLOTS, 5, fresh.message_off)) {
        return NULL;
    }
    if (!Py_IS_TYPE(root, (PyTypeObject *)mid_type) || !PyCallable_Check(read_vclock)
            || !PyType_Check(decode_error)
            || !PyType_IsSubtype((PyTypeObject *)decode_error, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "setup: unexpected arguments");
        return NULL;
    }
    Py_XDECREF(state.mid_type);
    Py_XDECREF(state.message_type);
    Py_XDECREF(state.root);
    Py_XDECREF(state.decode_error);
    Py_XDECREF(state.read_vclock);
    fresh.mid_type = (PyTypeObject *)Py_NewRef(mid_type);
    fresh.message_type = (PyTypeObject *)Py_NewRef(message_type);
    fresh.root = Py_NewRef(root);
    fresh.decode_error = Py_NewRef(decode_error);
    fresh.read_vclock = Py_NewRef(read_vclock);
    fresh.max_pid = max_pid;
    fresh.max_list = max_list;
    fresh.ready = 1;
    state = fresh;
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

static PyObject *
records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "records(raw, max_seq)");
        return NULL;
    }
    if (!state.ready) {
        PyErr_SetString(PyExc_RuntimeError, "m2mc._speedups.setup was not called");
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
    /* The list may not change under us: msgpack's lists reach no other code, but a
     * caller's could, so every item is read with the list's current size. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(raw); i++) {
        PyObject *r = PyList_GET_ITEM(raw, i);
        if (!PyList_CheckExact(r)) {
            fail("bad data record");
            goto error;
        }
        Py_ssize_t n = PyList_GET_SIZE(r);
        PyObject *gseq = Py_None, *vclock = NULL;
        if (n == 6 || n == 7) {
            PyObject *raw_gseq = PyList_GET_ITEM(r, 5);
            long long g;
            if (raw_gseq != Py_None) {
                if (int_in(raw_gseq, 1, max_seq, &g) != 1) {
                    fail("integer out of range");
                    goto error;
                }
                gseq = raw_gseq;
            }
            if (n == 7) {
                PyObject *seq_arg = PyLong_FromLongLong(max_seq);
                if (seq_arg == NULL) {
                    goto error;
                }
                vclock = PyObject_CallFunctionObjArgs(state.read_vclock, PyList_GET_ITEM(r, 6),
                                                      seq_arg, NULL);
                Py_DECREF(seq_arg);
                if (vclock == NULL) {
                    goto error;
                }
                if (n != PyList_GET_SIZE(r)) {  /* read_vclock changed the record */
                    Py_DECREF(vclock);
                    fail("bad data record");
                    goto error;
                }
            }
        } else if (n != 5) {
            fail("bad data record");
            goto error;
        }
        PyObject *pid = PyList_GET_ITEM(r, 0), *seq = PyList_GET_ITEM(r, 1);
        PyObject *ppid = PyList_GET_ITEM(r, 2), *pseq = PyList_GET_ITEM(r, 3);
        PyObject *payload = PyList_GET_ITEM(r, 4);
        long long s, ps;
        if (!PyUnicode_CheckExact(pid) || !PyLong_CheckExact(seq) || !PyUnicode_CheckExact(ppid)
                || !PyLong_CheckExact(pseq) || !PyBytes_CheckExact(payload)
                || PyUnicode_GET_LENGTH(pid) == 0 || PyUnicode_GET_LENGTH(pid) > state.max_pid
                || int_in(seq, 1, max_seq, &s) != 1
                || PyUnicode_GET_LENGTH(ppid) > state.max_pid) {
            Py_XDECREF(vclock);
            fail("bad data record");
            goto error;
        }
        PyObject *parent;
        if (PyUnicode_GET_LENGTH(ppid) > 0) {
            if (int_in(pseq, 1, max_seq, &ps) != 1) {
                Py_XDECREF(vclock);
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
            Py_XDECREF(vclock);
            fail("bad parent seqno");
            goto error;
        }
        if (parent == NULL) {
            Py_XDECREF(vclock);
            goto error;
        }
        PyObject *mid = new_mid(pid, seq);
        if (mid == NULL) {
            Py_DECREF(parent);
            Py_XDECREF(vclock);
            goto error;
        }
        PyObject *message = new_message(mid, parent, payload, vclock ? vclock : Py_None, gseq);
        Py_DECREF(parent);
        Py_XDECREF(vclock);
        Py_SETREF(prev, mid);
        prev_pid = pid;  /* borrowed: prev holds it */
        prev_seq = s;
        if (message == NULL || PyList_Append(out, message) < 0) {
            Py_XDECREF(message);
            goto error;
        }
        Py_DECREF(message);
    }
    Py_DECREF(prev);
    return out;
error:
    Py_DECREF(prev);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(MessageId, Message, ROOT, DecodeError, read_vclock, max_pid, max_list): "
     "the classes and bounds `records` builds and checks with (TypeError if the "
     "classes are not plain slots classes of the expected fields)."},
    {"records", (PyCFunction)(void (*)(void))records, METH_FASTCALL,
     "records(raw, max_seq): m2mc.group.codec's _records, in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "m2mc._speedups",
    "The receivers' hot loop in C; m2mc.speedups says whether it is used.", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module_def);
}
