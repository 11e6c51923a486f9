//! Values between JSON and Starlark, both ways: dicts (string keys), lists, tuples (as JSON
//! arrays), strings, booleans, None, floats, and integers of any size.

use std::str::FromStr;

use num_bigint::BigInt;
use starlark::typing::Ty;
use starlark::values::dict::AllocDict;
use starlark::values::list::AllocList;
use starlark::values::type_repr::StarlarkTypeRepr;
use starlark::values::{AllocFrozenValue, AllocValue, FrozenHeap, FrozenValue, Heap, Value};

/// A JSON value on its way into a Starlark heap. Starlark's own conversion turns integers too
/// large for 64 bits into floats; this one keeps them exact.
pub(crate) struct JsonValue(pub(crate) serde_json::Value);

/// A JSON number as the Starlark number it stands for.
enum Number {
    Signed(i64),
    Unsigned(u64),
    Big(BigInt),
    Float(f64),
}

impl Number {
    fn of(number: &serde_json::Number) -> Self {
        if let Some(signed) = number.as_i64() {
            return Self::Signed(signed);
        }
        if let Some(unsigned) = number.as_u64() {
            return Self::Unsigned(unsigned);
        }
        // With arbitrary precision (which starlark turns on), a number keeps its text, so an
        // integer of any size is still recognisable as one.
        let text = number.to_string();
        let digits = text.strip_prefix('-').unwrap_or(&text);
        if !digits.is_empty()
            && digits.bytes().all(|byte| byte.is_ascii_digit())
            && let Ok(big) = BigInt::from_str(&text)
        {
            return Self::Big(big);
        }
        Self::Float(number.as_f64().unwrap_or(f64::NAN))
    }
}

impl StarlarkTypeRepr for JsonValue {
    type Canonical = <serde_json::Value as StarlarkTypeRepr>::Canonical;

    fn starlark_type_repr() -> Ty {
        serde_json::Value::starlark_type_repr()
    }
}

/// The two heaps a JSON value is allocated on: a run's heap, and the frozen heap of the
/// globals (for `run`). One conversion serves both.
trait JsonHeap<'v> {
    type Allocated;
    fn none(&self) -> Self::Allocated;
    fn boolean(&self, boolean: bool) -> Self::Allocated;
    fn put<T: AllocValue<'v> + AllocFrozenValue>(&self, value: T) -> Self::Allocated;
}

impl<'v> JsonHeap<'v> for Heap<'v> {
    type Allocated = Value<'v>;

    fn none(&self) -> Value<'v> {
        Value::new_none()
    }

    fn boolean(&self, boolean: bool) -> Value<'v> {
        Value::new_bool(boolean)
    }

    fn put<T: AllocValue<'v> + AllocFrozenValue>(&self, value: T) -> Value<'v> {
        self.alloc(value)
    }
}

impl<'v> JsonHeap<'v> for &FrozenHeap {
    type Allocated = FrozenValue;

    fn none(&self) -> FrozenValue {
        FrozenValue::new_none()
    }

    fn boolean(&self, boolean: bool) -> FrozenValue {
        FrozenValue::new_bool(boolean)
    }

    fn put<T: AllocValue<'v> + AllocFrozenValue>(&self, value: T) -> FrozenValue {
        self.alloc(value)
    }
}

/// Allocates `value` on `heap`, containers element by element.
fn allocate<'v, H: JsonHeap<'v>>(value: serde_json::Value, heap: H) -> H::Allocated {
    match value {
        serde_json::Value::Null => heap.none(),
        serde_json::Value::Bool(boolean) => heap.boolean(boolean),
        serde_json::Value::Number(number) => match Number::of(&number) {
            Number::Signed(signed) => heap.put(signed),
            Number::Unsigned(unsigned) => heap.put(unsigned),
            Number::Big(big) => heap.put(big),
            Number::Float(float) => heap.put(float),
        },
        serde_json::Value::String(text) => heap.put(text),
        serde_json::Value::Array(items) => heap.put(AllocList(items.into_iter().map(JsonValue))),
        serde_json::Value::Object(object) => heap.put(AllocDict(
            object
                .into_iter()
                .map(|(key, value)| (key, JsonValue(value))),
        )),
    }
}

impl<'v> AllocValue<'v> for JsonValue {
    fn alloc_value(self, heap: Heap<'v>) -> Value<'v> {
        allocate(self.0, heap)
    }
}

impl AllocFrozenValue for JsonValue {
    fn alloc_frozen_value(self, heap: &FrozenHeap) -> FrozenValue {
        allocate::<'static>(self.0, heap)
    }
}

/// A Starlark value as JSON, as starlark writes it: tuples and sets become arrays, number keys
/// their text, a struct an object; functions and other values JSON has no form for are refused.
pub(crate) fn to_json(value: Value) -> Result<serde_json::Value, String> {
    value.to_json_value().map_err(|cause| cause.to_string())
}
