/* The least work a per-line recorder written in C does: a floor for the benchmark, not a recorder.
 *
 * The same work as `line_floor.py`'s `_Floor` with sys.monitoring (Python >= 3.12), with no Python
 * run per event: after each statement of the watched forwards, one read of the frame's locals
 * (`PyFrame_GetLocals`, which syncs them as `frame.f_locals` does), a snapshot of them, and a copy
 * (`Tensor.clone` through torch's Python binding, as a C core built on the C API would call it) of
 * each tensor held by the statement's targets or live names that it has not copied yet in this
 * forward. Its records are not right (no entries, returns, compiled calls, write detection): it
 * measures what a recorder in C would pay at least. `line_floor.py` builds it (`build_c_floor`) and
 * drives it.
 *
 * `Floor(statements, tensor_type, copy, lean=False)`: `statements` maps `id(code)` to a dict from a
 * line number to `(statement, names)`, the statement starting there and the names to look up after
 * it. Its methods `on_start`, `on_line` and `on_return` are the sys.monitoring callbacks; `raw` holds
 * `(statement, [(name, copy)], snapshot)` per finished statement.
 *
 * `lean`: read only the watched names, each with `PyFrame_GetVar` (Python >= 3.12: it reads the
 * frame's own slot, with no sync of every local into a dict), and keep no snapshot (None): the least
 * a recorder pays whose aliasing needs no snapshot of the locals (the lean C floor).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

typedef struct {
    PyObject *frame;     /* the watched frame (a strong reference while it runs) */
    PyObject *lines;     /* its code's dict: line -> (statement, names) */
    PyObject *current;   /* the (statement, names) running, or NULL */
} Entry;

typedef struct {
    PyObject_HEAD
    PyObject *statements;
    PyObject *tensor_type;
    PyObject *copies;    /* address of a tensor -> (tensor, its copy) */
    PyObject *raw;
    int copy;
    int lean;            /* watched names only (PyFrame_GetVar), no snapshot */
    Entry *stack;
    Py_ssize_t depth, cap;
} Floor;

static PyObject *str_clone;

/* The value `name` holds in `frame` (a new reference), or NULL with no error set when it holds none:
 * from the synced `locals`, or (lean) from the frame's own slot */
static PyObject *
lookup(Floor *self, PyObject *frame, PyObject *locals, PyObject *name)
{
    if (!self->lean) {
        PyObject *value = PyDict_GetItemWithError(locals, name);
        return value == NULL ? NULL : Py_NewRef(value);
    }
    PyObject *value = PyFrame_GetVar((PyFrameObject *)frame, name);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_NameError))
        PyErr_Clear();   /* not bound (yet) */
    return value;
}

/* Keep `(name, copy of value)` in `kept` when `value` is a tensor: the copy taken now, or the one
 * already taken of that very tensor object in this forward */
static int
keep(Floor *self, PyObject *kept, PyObject *name, PyObject *value)
{
    if (!PyObject_TypeCheck(value, (PyTypeObject *)self->tensor_type))
        return 0;
    PyObject *ident = PyLong_FromVoidPtr(value);
    if (ident == NULL)
        return -1;
    PyObject *hit = PyDict_GetItemWithError(self->copies, ident);
    PyObject *copy;
    if (hit != NULL && PyTuple_GET_ITEM(hit, 0) == value) {
        copy = Py_NewRef(PyTuple_GET_ITEM(hit, 1));
    } else {
        copy = self->copy ? PyObject_CallMethodNoArgs(value, str_clone) : Py_NewRef(value);
        PyObject *pair = copy == NULL ? NULL : PyTuple_Pack(2, value, copy);
        if (pair == NULL || PyDict_SetItem(self->copies, ident, pair) < 0) {
            Py_XDECREF(pair);
            Py_XDECREF(copy);
            Py_DECREF(ident);
            return -1;
        }
        Py_DECREF(pair);
    }
    Py_DECREF(ident);
    PyObject *item = PyTuple_Pack(2, name, copy);
    Py_DECREF(copy);
    if (item == NULL || PyList_Append(kept, item) < 0) {
        Py_XDECREF(item);
        return -1;
    }
    Py_DECREF(item);
    return 0;
}

/* `done` (a (statement, names) pair) has finished in `frame`: copy what it holds, keep a snapshot
 * (lean: no snapshot, and each name read from its own slot) */
static int
finish(Floor *self, PyObject *frame, PyObject *done)
{
    PyObject *names = PyTuple_GET_ITEM(done, 1);
    PyObject *locals = NULL;
    if (!self->lean && (locals = PyFrame_GetLocals((PyFrameObject *)frame)) == NULL)
        return -1;
    PyObject *kept = PyList_New(0);
    if (kept == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        PyObject *value = lookup(self, frame, locals, name);   /* a new reference */
        if (value == NULL) {
            if (PyErr_Occurred())
                goto fail;
            continue;
        }
        int rc = keep(self, kept, name, value);
        Py_DECREF(value);
        if (rc < 0)
            goto fail;
    }
    PyObject *snapshot = self->lean ? Py_NewRef(Py_None) : PyDict_Copy(locals);
    PyObject *row = snapshot == NULL ? NULL : PyTuple_Pack(3, PyTuple_GET_ITEM(done, 0), kept, snapshot);
    Py_XDECREF(snapshot);
    if (row == NULL || PyList_Append(self->raw, row) < 0) {
        Py_XDECREF(row);
        goto fail;
    }
    Py_DECREF(row);
    Py_DECREF(kept);
    Py_XDECREF(locals);
    return 0;
fail:
    Py_XDECREF(kept);
    Py_XDECREF(locals);
    return -1;
}

static PyObject *
on_start(Floor *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1)
        return PyErr_Format(PyExc_TypeError, "on_start(code, offset)");
    PyObject *ident = PyLong_FromVoidPtr(args[0]);
    if (ident == NULL)
        return NULL;
    PyObject *lines = PyDict_GetItemWithError(self->statements, ident);
    Py_DECREF(ident);
    if (lines == NULL)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_RuntimeError, "C floor: a code object it does not watch");
    if (self->depth == self->cap) {
        Py_ssize_t cap = self->cap ? 2 * self->cap : 16;
        Entry *grown = PyMem_Realloc(self->stack, cap * sizeof(Entry));
        if (grown == NULL)
            return PyErr_NoMemory();
        self->stack = grown;
        self->cap = cap;
    }
    PyFrameObject *frame = PyEval_GetFrame();   /* the watched frame: a C callback pushes none */
    if (frame == NULL)
        return PyErr_Format(PyExc_RuntimeError, "C floor: no Python frame at PY_START");
    Entry *e = &self->stack[self->depth++];
    e->frame = Py_NewRef((PyObject *)frame);
    e->lines = Py_NewRef(lines);
    e->current = NULL;
    Py_RETURN_NONE;
}

static PyObject *
on_line(Floor *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || self->depth == 0)
        return PyErr_Format(PyExc_RuntimeError, "C floor: a line event outside a watched frame");
    Entry *e = &self->stack[self->depth - 1];
    PyObject *stmt = PyDict_GetItemWithError(e->lines, args[1]);
    if (stmt == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    if (stmt == e->current)
        Py_RETURN_NONE;
    PyObject *done = e->current;
    e->current = Py_NewRef(stmt);
    if (done != NULL) {
        int rc = finish(self, e->frame, done);
        Py_DECREF(done);
        if (rc < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
on_return(Floor *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (self->depth == 0)
        return PyErr_Format(PyExc_RuntimeError, "C floor: a return outside a watched frame");
    Entry *e = &self->stack[self->depth - 1];
    int rc = e->current != NULL ? finish(self, e->frame, e->current) : 0;
    self->depth--;
    Py_XDECREF(e->current);
    Py_DECREF(e->lines);
    Py_DECREF(e->frame);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int
Floor_init(Floor *self, PyObject *args, PyObject *kwds)
{
    PyObject *statements, *tensor_type;
    int copy, lean = 0;
    if (!PyArg_ParseTuple(args, "O!Op|p", &PyDict_Type, &statements, &tensor_type, &copy, &lean))
        return -1;
    if (!PyType_Check(tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "tensor_type must be a type");
        return -1;
    }
    Py_XSETREF(self->statements, Py_NewRef(statements));
    Py_XSETREF(self->tensor_type, Py_NewRef(tensor_type));
    Py_XSETREF(self->copies, PyDict_New());
    Py_XSETREF(self->raw, PyList_New(0));
    self->copy = copy;
    self->lean = lean;
    return self->copies != NULL && self->raw != NULL ? 0 : -1;
}

static void
Floor_dealloc(Floor *self)
{
    while (self->depth > 0) {
        Entry *e = &self->stack[--self->depth];
        Py_XDECREF(e->current);
        Py_DECREF(e->lines);
        Py_DECREF(e->frame);
    }
    PyMem_Free(self->stack);
    Py_XDECREF(self->statements);
    Py_XDECREF(self->tensor_type);
    Py_XDECREF(self->copies);
    Py_XDECREF(self->raw);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Floor_raw(Floor *self, void *closure)
{
    return Py_NewRef(self->raw);
}

static PyMethodDef Floor_methods[] = {
    {"on_start", (PyCFunction)(void (*)(void))on_start, METH_FASTCALL, "PY_START callback"},
    {"on_line", (PyCFunction)(void (*)(void))on_line, METH_FASTCALL, "LINE callback"},
    {"on_return", (PyCFunction)(void (*)(void))on_return, METH_FASTCALL, "PY_RETURN callback"},
    {NULL},
};

static PyGetSetDef Floor_getset[] = {
    {"raw", (getter)Floor_raw, NULL, "(statement, [(name, copy)], snapshot) per finished statement", NULL},
    {NULL},
};

static PyTypeObject FloorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_line_floor_c.Floor",
    .tp_basicsize = sizeof(Floor),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Floor_init,
    .tp_dealloc = (destructor)Floor_dealloc,
    .tp_methods = Floor_methods,
    .tp_getset = Floor_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_line_floor_c", "The C floor of the line recorder (bench only).", -1};

PyMODINIT_FUNC
PyInit__line_floor_c(void)
{
    str_clone = PyUnicode_InternFromString("clone");
    if (str_clone == NULL || PyType_Ready(&FloorType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Floor", (PyObject *)&FloorType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
