//! `view!`: a wire type and the `From` that builds it from a domain value,
//! declared together so each field is written once, with its type and where
//! its value comes from. Adding a field to a view is one line.

/// Declares `pub struct $view` with the given attributes and fields, and
/// `impl From<$from> for $view`: the statements in the first block run first
/// (to take apart the domain value, or to borrow from it before its fields
/// move), then each field is its expression, in the order written (which is
/// also the order of the keys in the JSON).
///
/// ```ignore
/// view! {
///     /// A thing, as the API shows it.
///     #[derive(Serialize, ToSchema)]
///     pub struct ThingView from (thing: Thing) {
///         let name = thing.name.to_uppercase();
///     } {
///         /// Its id.
///         id: i64 = thing.id,
///         name: String = name,
///     }
/// }
/// ```
macro_rules! view {
    (
        $(#[$attr:meta])*
        pub struct $view:ident from ($source:ident: $from:ty) {
            $($setup:tt)*
        } {
            $( $(#[$field_attr:meta])* $field:ident: $ty:ty = $value:expr, )*
        }
    ) => {
        $(#[$attr])*
        pub struct $view {
            $( $(#[$field_attr])* pub $field: $ty, )*
        }

        impl From<$from> for $view {
            fn from($source: $from) -> Self {
                $($setup)*
                $view { $( $field: $value, )* }
            }
        }
    };
}
pub(super) use view;
