//! Short English children's stories written by code (TinyStories' style: simple words, a named child,
//! a thing, a friend, a small event), so that a story model's corpus ships as this file and a seed.
//! Each story names its characters and its object several times, which gives an induction head
//! something to copy. ASCII only.

use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Girls' names (`she`).
const GIRLS: &[&str] = &[
    "Lily", "Mia", "Sue", "Anna", "Emma", "Lucy", "Sara", "Zoe", "Ella", "Amy", "Kate", "Rose",
    "Jane", "Molly", "Daisy", "Ruby", "Nora", "Ivy", "Lola", "Tina",
];
/// Boys' names (`he`).
const BOYS: &[&str] = &[
    "Tom", "Ben", "Max", "Sam", "Tim", "Jack", "Leo", "Finn", "Jake", "Bob", "Joe", "Dan", "Noah",
    "Luke", "Ned", "Otto", "Ray", "Ted", "Will", "Hugo",
];
/// Things a child can have, find or lose.
const THINGS: &[&str] = &[
    "ball", "kite", "doll", "hat", "box", "boat", "car", "book", "cup", "drum", "bike", "shoe",
    "toy", "bear", "rock", "stick", "cake", "apple", "flower", "leaf", "shell", "key", "bell",
    "coat", "sock", "map", "pen", "ring", "star", "egg",
];
/// Words that describe a thing.
const LOOKS: &[&str] = &[
    "red", "blue", "big", "small", "shiny", "soft", "green", "yellow", "old", "new", "pink",
    "little", "pretty", "funny", "white", "round",
];
/// Places to play.
const PLACES: &[&str] = &[
    "park", "garden", "house", "forest", "beach", "yard", "school", "farm", "lake", "hill",
    "street", "room", "shop", "zoo",
];
/// Animals, as friends or visitors.
const ANIMALS: &[&str] = &[
    "dog", "cat", "bird", "frog", "duck", "fox", "rabbit", "mouse", "cow", "pig", "bee", "fish",
];
/// Feelings.
const FEELINGS: &[&str] = &[
    "happy",
    "sad",
    "scared",
    "proud",
    "tired",
    "excited",
    "angry",
    "surprised",
];
/// Things to do with a thing.
const PLAYS: &[&str] = &[
    "play with",
    "look at",
    "carry",
    "share",
    "hold",
    "show everyone",
];

/// One character of a story.
#[derive(Clone)]
struct Who {
    name: String,
    he: &'static str,
    his: &'static str,
}

/// A name from the lists.
fn name(rng: &mut impl Rng, girl: bool) -> String {
    pick(rng, if girl { GIRLS } else { BOYS }).to_string()
}

fn who(rng: &mut impl Rng, not: Option<&str>) -> Who {
    loop {
        let girl = rng.random_bool(0.5);
        let name = name(rng, girl);
        if Some(name.as_str()) == not {
            continue;
        }
        let (he, his) = if girl { ("she", "her") } else { ("he", "his") };
        return Who { name, he, his };
    }
}

fn pick(rng: &mut impl Rng, words: &[&'static str]) -> &'static str {
    words.choose(rng).copied().unwrap_or("")
}

/// The first letter in upper case.
fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

/// One story drawn from `rng`.
pub fn story(rng: &mut impl Rng) -> String {
    let a = who(rng, None);
    let b = who(rng, Some(&a.name));
    let (thing, look, place) = (pick(rng, THINGS), pick(rng, LOOKS), pick(rng, PLACES));
    let animal = pick(rng, ANIMALS);
    let (n, he, his, he_cap) = (a.name.as_str(), a.he, a.his, capital(a.he));
    let mut s: Vec<String> = Vec::new();
    s.push(match rng.random_range(0..4) {
        0 => format!(
            "Once upon a time, there was a little {} named {n}.",
            if he == "she" { "girl" } else { "boy" }
        ),
        1 => format!("One day, {n} went to the {place}."),
        2 => format!(
            "{n} was a little {} who lived near the {place}.",
            if he == "she" { "girl" } else { "boy" }
        ),
        _ => format!(
            "There was a {} named {n}. {he_cap} liked to play.",
            if he == "she" { "girl" } else { "boy" }
        ),
    });
    s.push(match rng.random_range(0..3) {
        0 => format!("{n} had a {look} {thing}. {he_cap} loved the {look} {thing} very much."),
        1 => format!("{n} liked to {} {his} {look} {thing}.", pick(rng, PLAYS)),
        _ => format!("{he_cap} had a {look} {thing} that {he} took everywhere."),
    });
    s.push(format!(
        "{n} went to the {place} with {his} friend {}.",
        b.name
    ));
    for _ in 0..rng.random_range(2..5) {
        s.push(event(rng, &a, &b, thing, look, place, animal));
    }
    s.push(match rng.random_range(0..4) {
        0 => format!("From that day on, {n} and {} were best friends.", b.name),
        1 => format!(
            "{n} was {} and went home with the {look} {thing}.",
            pick(rng, FEELINGS)
        ),
        2 => format!(
            "{n} and {} played in the {place} until the sun went down.",
            b.name
        ),
        _ => format!("{n} learned to share, and {} was happy too.", b.name),
    });
    s.join(" ")
}

/// One event of the story's middle.
fn event(
    rng: &mut impl Rng,
    a: &Who,
    b: &Who,
    thing: &str,
    look: &str,
    place: &str,
    animal: &str,
) -> String {
    let (n, m) = (a.name.as_str(), b.name.as_str());
    let (he_cap, his) = (capital(a.he), a.his);
    let feeling = pick(rng, FEELINGS);
    match rng.random_range(0..9) {
        0 => {
            format!("{m} said, \"Can I play with your {thing}, {n}?\" {n} said, \"Yes, you can.\"")
        }
        1 => format!(
            "Then a {animal} came to the {place}. The {animal} wanted the {look} {thing} too."
        ),
        2 => format!(
            "{n} could not find {his} {thing}. {he_cap} was {feeling}. {m} helped {n} look for it."
        ),
        3 => format!(
            "{m} found the {look} {thing} under a tree. {n} was so happy to see the {thing} again."
        ),
        4 => format!(
            "The {thing} fell into the water. {n} and {m} worked together to get the {thing} back."
        ),
        5 => format!("{n} gave the {thing} to {m}. {m} smiled and said, \"Thank you, {n}!\""),
        6 => format!("It started to rain. {n} and {m} ran home with the {thing}."),
        7 => format!("The {animal} took the {thing} and ran away. {n} ran after the {animal}."),
        _ => format!("{n} felt {feeling}. {m} gave {n} a big hug."),
    }
}

/// `n` stories from `seed`: the same seed gives the same stories.
pub fn stories(seed: u64, n: usize) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| story(&mut rng)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stories_are_deterministic_ascii_and_repeat_their_names() {
        let a = stories(1, 50);
        assert_eq!(a, stories(1, 50));
        assert_ne!(a, stories(2, 50));
        for s in &a {
            assert!(s.is_ascii(), "{s}");
            let words = s.split_whitespace().count();
            assert!((30..=250).contains(&words), "{words} words: {s}");
            // The main character's name: after "named", else the first sentence's capitalised word.
            let first = s.split('.').next().unwrap_or("");
            let name = match first.rsplit_once(" named ") {
                Some((_, n)) => n,
                None => first
                    .split_whitespace()
                    .find(|w| {
                        !["One", "There", "Once"].contains(w) && w.starts_with(char::is_uppercase)
                    })
                    .unwrap_or(""),
            };
            assert!(
                !name.is_empty() && s.matches(name).count() >= 3,
                "{name:?}: {s}"
            );
        }
    }
}
